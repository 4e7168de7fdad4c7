package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's first Go block is this package's main.go, byte for byte,
// within the README's first 60 lines: the script a new user copies is the
// one the test suite compiles.
func TestREADMEQuotesThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	lines := strings.SplitAfter(string(readme), "\n")
	start := -1
	for i, l := range lines {
		if l == "```go\n" {
			start = i + 1
			break
		}
	}
	require.NotEqual(t, -1, start, "the README has no ```go block")
	end := start
	for end < len(lines) && lines[end] != "```\n" {
		end++
	}
	require.Less(t, end, len(lines), "the README's first ```go block is not closed")
	require.Equal(t, string(src), strings.Join(lines[start:end], ""),
		"the README's first Go block differs from examples/readme/main.go: copy the file into the README")
	require.LessOrEqual(t, end+1, 60, "the script must end within the README's first 60 lines")
}
