package tokenshards

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/goddp/goddp/tokenizer"
)

// splitter cuts one input into the pieces the workers encode: each piece
// is part of one document, cut where tokenizer.LastCut allows, so the ids
// of a document's pieces, concatenated, are the ids of the document.
type splitter struct {
	chunk      int  // a piece is cut once the buffered text reaches this many bytes
	paragraphs bool // blank lines end documents; otherwise a whole input is one
	// emit receives each piece; docStart marks the first piece of a document.
	// text is the splitter's own copy.
	emit func(text []byte, docStart bool) error
}

// isBlank reports whether line holds only whitespace (a blank line between
// paragraphs, with its line end).
func isBlank(line []byte) bool {
	return len(bytes.Trim(line, " \t\r\n\f\v")) == 0
}

// split reads src (named name in errors) to the end.
func (s *splitter) split(src io.Reader, name string) error {
	br := bufio.NewReaderSize(src, 64<<10)
	var buf []byte       // the current document's text not yet emitted
	started := false     // the current document has emitted a piece
	nextCheck := s.chunk // buffer length at which to look for a cut again
	midLine := false     // the last read ended inside a line (bufio.ErrBufferFull)
	emit := func(text []byte) error {
		piece := bytes.Clone(text)
		docStart := !started
		started = true
		return s.emit(piece, docStart)
	}
	endDoc := func() error {
		if s.paragraphs {
			// A paragraph is its lines without the last line's end.
			buf = bytes.TrimSuffix(buf, []byte("\n"))
			buf = bytes.TrimSuffix(buf, []byte("\r"))
		}
		if len(buf) > 0 {
			if err := emit(buf); err != nil {
				return err
			}
		}
		buf, started, nextCheck = buf[:0], false, s.chunk
		return nil
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if s.paragraphs && !midLine && err != bufio.ErrBufferFull && isBlank(line) {
				if e := endDoc(); e != nil {
					return e
				}
			} else {
				buf = append(buf, line...)
			}
			if len(buf) >= nextCheck {
				if c := tokenizer.LastCut(buf); c > 0 {
					if e := emit(buf[:c]); e != nil {
						return e
					}
					buf = append(buf[:0], buf[c:]...)
					nextCheck = max(s.chunk, len(buf)+1)
				} else {
					// No cut point yet: look again once the text has
					// doubled, so that a text without any costs linear time.
					nextCheck = 2 * len(buf)
				}
			}
		}
		midLine = err == bufio.ErrBufferFull
		switch {
		case err == nil || midLine:
		case errors.Is(err, io.EOF):
			return endDoc()
		default:
			return fmt.Errorf("tokenshards: reading %s: %w", name, err)
		}
	}
}
