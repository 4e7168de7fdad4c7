package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeAnswersEachMode(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, serve(strings.NewReader("16 3\n16 2 cgo\n8 2 cloop\n"), &out))
	lines := strings.Fields(out.String())
	require.Len(t, lines, 3, out.String())
	for _, l := range lines {
		secs, err := strconv.ParseFloat(l, 64)
		require.NoError(t, err)
		assert.Greater(t, secs, 0.0)
	}
}

func TestServeRejectsBadRequests(t *testing.T) {
	for _, req := range []string{"16", "16 0", "x 2", "16 2 fast", "1 2 3 4"} {
		err := serve(strings.NewReader(req+"\n"), &bytes.Buffer{})
		require.Error(t, err, req)
		assert.Contains(t, err.Error(), "bad request", req)
	}
}
