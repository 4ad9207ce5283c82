package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress draws a progress bar on stderr when it is a terminal:
//
//	copying   42% [=========>            ] 12.3 MiB/29.0 MiB  4.1 MiB/s  ETA 4s  3/7 segments
//
// It redraws at most ten times a second from its own goroutine; messages
// printed meanwhile through app.warnf and app.infof clear the bar first. A
// nil *progress does nothing, so commands use it unconditionally.
type progress struct {
	a      *app
	label  string
	bytes  bool // count bytes, else records
	total  atomic.Int64
	done   atomic.Int64
	note   atomic.Pointer[string]
	start  time.Time
	width  int
	stop   chan struct{}
	wg     sync.WaitGroup
	drawn  bool // guarded by a.outMu
	closed bool // guarded by a.outMu
}

// progressEnabled reports whether progress bars are drawn: stderr is a
// terminal and --quiet is off.
func (a *app) progressEnabled() bool {
	if a.quiet || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress starts a bar counting up to total bytes (or records when
// bytes is false); nil when bars are off.
func (a *app) newProgress(label string, total int64, bytes bool) *progress {
	if !a.progressEnabled() {
		return nil
	}
	width := 80
	if f, ok := a.stderr.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
			width = w
		}
	}
	p := &progress{a: a, label: label, bytes: bytes, start: time.Now(), width: width, stop: make(chan struct{})}
	p.total.Store(total)
	a.outMu.Lock()
	a.bar = p
	p.drawLocked() // at once: the first tick comes later
	a.outMu.Unlock()
	p.wg.Add(1)
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.stop:
			return
		}
		p.a.outMu.Lock()
		if !p.closed {
			p.drawLocked()
		}
		p.a.outMu.Unlock()
	}
}

// add counts n more bytes or records done.
func (p *progress) add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

// set sets how much is done.
func (p *progress) set(n int64) {
	if p != nil {
		p.done.Store(n)
	}
}

// addTotal raises the total.
func (p *progress) addTotal(n int64) {
	if p != nil {
		p.total.Add(n)
	}
}

// setNote sets the text shown after the bar, e.g. "3/7 segments".
func (p *progress) setNote(s string) {
	if p != nil {
		p.note.Store(&s)
	}
}

// finish stops the bar and erases it.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.a.outMu.Lock()
	p.closed = true
	p.clearLocked()
	if p.a.bar == p {
		p.a.bar = nil
	}
	p.a.outMu.Unlock()
	close(p.stop)
	p.wg.Wait()
}

func (p *progress) clearLocked() {
	if p.drawn {
		io.WriteString(p.a.stderr, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) amount(n int64) string {
	if p.bytes {
		return humanBytes(n)
	}
	return strconv.FormatInt(n, 10)
}

func (p *progress) drawLocked() {
	done, total := p.done.Load(), p.total.Load()
	elapsed := time.Since(p.start)
	var rate float64
	if s := elapsed.Seconds(); s > 0.2 {
		rate = float64(done) / s
	}
	var right []string
	if total > 0 {
		right = append(right, p.amount(done)+"/"+p.amount(total))
	} else {
		right = append(right, p.amount(done))
	}
	if rate > 0 {
		if p.bytes {
			right = append(right, humanBytes(int64(rate))+"/s")
		} else {
			right = append(right, strconv.FormatFloat(rate, 'f', 0, 64)+"/s")
		}
		if total > done {
			eta := time.Duration(float64(total-done) / rate * float64(time.Second))
			right = append(right, "ETA "+eta.Round(time.Second).String())
		}
	}
	if n := p.note.Load(); n != nil && *n != "" {
		right = append(right, *n)
	}
	tail := strings.Join(right, "  ")
	pct := "   "
	frac := 0.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
		pct = fmt.Sprintf("%3d%%", int(frac*100))
	}
	head := fmt.Sprintf("%-9s %s ", p.label, pct)
	barW := min(40, p.width-len(head)-len(tail)-4)
	line := head
	if barW >= 10 {
		fill := int(frac * float64(barW))
		bar := strings.Repeat("=", fill)
		if fill < barW {
			bar += ">" + strings.Repeat(" ", barW-fill-1)
		}
		line += "[" + bar + "] "
	}
	line += tail
	if len(line) > p.width-1 {
		line = line[:p.width-1]
	}
	io.WriteString(p.a.stderr, "\r\033[K"+line)
	p.drawn = true
}
