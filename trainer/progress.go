package trainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Progress is a callback that shows an epoch's progress. On a terminal it
// redraws one bar in place with a carriage return; anywhere else (a file, a
// pipe, a launcher collecting the log) it prints whole lines, at most one
// per Every and one at the epoch's end, so that the log holds no \r
// and does not grow with every step. Add it on rank 0 only (Main does),
// or every rank draws its own bar.
type Progress struct {
	// Every is the least time between two lines when the output is not a
	// terminal (default 10 s; negative: a line every step).
	Every time.Duration

	w       io.Writer
	tty     bool
	last    time.Time // when the last line was printed
	printed bool      // a line of this epoch was printed
	now     func() time.Time
}

// NewProgress draws to w, as a bar when w is a terminal (an *os.File on a
// character device) and as lines otherwise.
func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, tty: isTerminal(w), now: time.Now}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const progressWidth = 30

// OnStep implements StepHook.
func (p *Progress) OnStep(_ context.Context, t *Trainer, s StepInfo) error {
	filled := 0
	if s.Steps > 0 {
		filled = min(s.Index*progressWidth/s.Steps, progressWidth)
	}
	bar := fmt.Sprintf("[%s] Epoch %d [%s%s] %d/%d loss %.4f", t.Device(), s.Epoch,
		strings.Repeat("=", filled), strings.Repeat(" ", progressWidth-filled), s.Index, s.Steps, s.RunningLoss)
	if p.tty {
		_, err := fmt.Fprintf(p.w, "\r%s", bar)
		if err == nil && s.Index == s.Steps {
			_, err = fmt.Fprintln(p.w)
		}
		return err
	}
	now := p.now()
	if s.Index == 1 {
		p.printed = false
		if p.last.IsZero() {
			p.last = now // the first line comes one period into the run
		}
	}
	every := p.Every
	if every == 0 {
		every = 10 * time.Second
	}
	end := s.Index == s.Steps
	if now.Sub(p.last) >= every || (end && p.printed) {
		p.last, p.printed = now, !end
		_, err := fmt.Fprintln(p.w, bar)
		return err
	}
	return nil
}
