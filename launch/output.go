package launch

import (
	"bytes"
	"io"
	"sync"
)

// console serialises whole lines from many workers onto one writer, so
// that their output never interleaves mid-line.
type console struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *console) writeLine(prefix string, line []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prefix != "" {
		_, _ = io.WriteString(c.w, prefix)
	}
	_, _ = c.w.Write(line)
}

// lineWriter splits a worker stream into lines and hands each complete line
// to its sinks: the console (with an optional prefix), a log file, and the
// tail kept for failure reports. Close flushes a final partial line.
type lineWriter struct {
	mu      sync.Mutex
	buf     []byte
	console *console // nil: not shown
	prefix  string
	file    io.Writer // nil: not saved
	tail    *tail     // nil: not kept
}

// maxLine bounds how much of a line without '\n' is buffered.
const maxLine = 64 << 10

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		_, _ = w.file.Write(p)
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLine {
				w.emit(append(w.buf, '\n'))
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) emit(line []byte) {
	if w.console != nil {
		w.console.writeLine(w.prefix, line)
	}
	if w.tail != nil {
		w.tail.add(string(bytes.TrimRight(line, "\r\n")))
	}
}

// Close flushes a last line that had no newline.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(append(w.buf, '\n'))
		w.buf = nil
	}
	return nil
}

// tail keeps the last n lines written to it.
type tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	const maxLen = 2048
	if len(line) > maxLen {
		line = line[:maxLen] + " ...(truncated)"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.n:]...)
	}
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}
