package console

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/internal/inspect"
)

// action is a change made through the console, as the page lists it.
type action struct {
	Time  string `json:"time"`
	Who   string `json:"who"`
	What  string `json:"what"`
	Error string `json:"error,omitempty"`
}

// actionLog keeps the last changes made through this console.
type actionLog struct {
	mu  sync.Mutex
	n   int
	buf []action // newest last
}

func newActionLog(n int) *actionLog { return &actionLog{n: n} }

func (l *actionLog) add(a action) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, a)
	if len(l.buf) > l.n {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-l.n:]...)
	}
}

// list returns the changes, newest first.
func (l *actionLog) list() []action {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]action, len(l.buf))
	for i, a := range l.buf {
		out[len(out)-1-i] = a
	}
	return out
}

// record logs a change made through the console and keeps it for the page.
func (h *Handler) record(r *http.Request, what string, err error, attrs ...any) {
	a := action{Time: inspect.JSONTime(time.Now()), Who: h.who(r), What: what}
	attrs = append([]any{slog.String("who", a.Who), slog.String("remote", r.RemoteAddr)}, attrs...)
	if err != nil {
		a.Error = err.Error()
		h.log.Warn("console: "+what+" failed", append(attrs, slog.Any("error", err))...)
	} else {
		h.log.Info("console: "+what, attrs...)
	}
	h.acts.add(a)
}
