package restorefaults

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/jobs"
)

// The jobs variant's control interleavings: a pause, a cancel, or a pause
// withdrawn by a resume at once, asked of the job running from another
// process just before a call of the store's tables or segment records
// (each call of ControlOps in turn: so before every write of the job's
// progress, of its end, of its due markers, of its segments' checkpoints),
// with the call made as usual (faults.Mark) or with the runner paused there
// past its lease while another runner takes over, and then going on
// (faults.Pause). Beyond the scenario's invariants (every record delivered
// once, none twice after a controlled stop), each request must be acted on
// or said to be refused: a cancel accepted ends the job cancelled, or
// completed with Job.Refused saying the cancel came too late; a pause
// accepted pauses it (the harness resumes it) or is refused alike; a pause
// withdrawn never leaves the job paused; and no job that ended holds a
// request.

// Control is a request a control run makes of the job running.
type Control string

// The requests of a control run.
const (
	ControlPause    Control = "pause"
	ControlCancel   Control = "cancel"
	ControlWithdraw Control = "pause+resume"
)

// Controls are every request a control run makes.
var Controls = []Control{ControlPause, ControlCancel, ControlWithdraw}

// ControlOps are the operations whose calls requests are interleaved with.
var ControlOps = []faults.Op{faults.OpTableWrite, faults.OpWriteRecord}

// controlModes are the ways a request is interleaved with a call: the call
// made as usual, or the runner paused there past its lease.
var controlModes = []faults.Mode{faults.Mark, faults.Pause}

// controlWatch is what a control run asked, and what became of it. A nil
// *controlWatch asked nothing.
type controlWatch struct {
	ctl Control

	mu         sync.Mutex
	job        string // the job asked; "" if none ran
	accepted   bool   // the request was accepted (a job that ended refuses it at once)
	resumed    bool   // pause+resume: the resume returned
	sawPaused  bool   // the job was seen paused
	violations []string
}

func (w *controlWatch) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// ask makes the request of the first job of the scenario that has not
// ended, through st (another process's).
func (w *controlWatch) ask(ctx context.Context, st *jobs.Store) {
	target := ""
	for _, spec := range jobSpecs {
		j, err := st.Get(ctx, spec.ID)
		if err == nil && !j.State.Final() {
			target = spec.ID
			break
		}
	}
	if target == "" {
		return // none created, or all ended: nothing to ask
	}
	// Noted as accepted before it is asked: the runs may see it acted on
	// before the answer comes.
	w.mu.Lock()
	w.job, w.accepted = target, true
	w.mu.Unlock()
	var err error
	switch w.ctl {
	case ControlPause, ControlWithdraw:
		_, err = st.Pause(ctx, target)
	case ControlCancel:
		_, err = st.Cancel(ctx, target)
	}
	if err != nil {
		w.mu.Lock()
		w.accepted = false // refused at once: the job had ended
		w.mu.Unlock()
	}
	if err != nil || w.ctl != ControlWithdraw {
		return
	}
	if _, err := st.Resume(ctx, target); err != nil {
		w.violate("resume of job %s right after its pause: %v", target, err)
		return
	}
	w.mu.Lock()
	w.resumed = true
	w.mu.Unlock()
}

// cancelled reports whether job id was cancelled as asked.
func (w *controlWatch) cancelled(id string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctl == ControlCancel && w.job == id && w.accepted
}

// paused checks job j, seen paused, against what was asked, and resumes it.
func (w *controlWatch) paused(ctx context.Context, st *jobs.Store, j *jobs.Job) error {
	w.mu.Lock()
	asked := w.job == j.ID && w.accepted
	ctl, resumed := w.ctl, w.resumed
	if asked && ctl != ControlCancel {
		w.sawPaused = true
	}
	w.mu.Unlock()
	switch {
	case !asked || ctl == ControlCancel:
		w.violate("job %s paused, no pause asked (%s asked of %q)", j.ID, ctl, w.job)
	case ctl == ControlWithdraw && resumed:
		// Read again: the read that saw it paused may have come before
		// the resume, which made it pending.
		cur, err := st.Get(ctx, j.ID)
		if err == nil && cur.State == jobs.Paused {
			w.violate("job %s paused after its pause was withdrawn by a resume", j.ID)
		}
		if err != nil || cur.State != jobs.Paused {
			return nil
		}
	case ctl == ControlWithdraw:
		return nil // the pause acted on before the resume: the resume makes it pending
	}
	if j.Request != "" {
		w.violate("job %s paused with request %q", j.ID, j.Request)
	}
	_, err := st.Resume(ctx, j.ID)
	return err
}

// check tests the jobs' records once the run and the recovery ended.
func (w *controlWatch) check(ctx context.Context, st *jobs.Store, res *Result) {
	for _, spec := range jobSpecs {
		j, err := st.Get(ctx, spec.ID)
		if err != nil {
			res.Violations = append(res.Violations, fmt.Sprintf("job %s: %v", spec.ID, err))
			continue
		}
		if j.Request != "" {
			res.Violations = append(res.Violations, fmt.Sprintf("job %s ended %s with request %q", j.ID, j.State, j.Request))
		}
		w.mu.Lock()
		asked, saw := w.job == j.ID && w.accepted, w.sawPaused
		w.mu.Unlock()
		refused := strings.HasPrefix(j.Refused, strings.SplitN(string(w.ctl), "+", 2)[0])
		switch {
		case !asked:
		case w.ctl == ControlCancel && j.State != jobs.Cancelled && !(j.State == jobs.Completed && refused):
			res.Violations = append(res.Violations, fmt.Sprintf("job %s: a cancel accepted was neither acted on nor refused: it is %s (refused %q)", j.ID, j.State, j.Refused))
		case w.ctl == ControlPause && !saw && !(j.State == jobs.Completed && refused):
			res.Violations = append(res.Violations, fmt.Sprintf("job %s: a pause accepted was neither acted on nor refused: it is %s (refused %q)", j.ID, j.State, j.Refused))
		}
	}
	w.mu.Lock()
	res.Violations = append(res.Violations, w.violations...)
	w.mu.Unlock()
}

// Control runs the jobs scenario with ctl asked of the job running just
// before the call at pt (pt.Mode faults.Mark: the call made as usual;
// faults.Pause: the runner also paused there while another runner takes
// over), then finishes without faults and checks the invariants: those of
// every run (none delivered twice unless the runner was paused), and what
// became of the request.
func (h *Harness) Control(ctx context.Context, pt faults.Point, ctl Control) (*Result, error) {
	if !h.Variant.Jobs {
		return nil, fmt.Errorf("restorefaults: a control run needs the jobs variant")
	}
	p, sd, ids, err := h.start()
	if err != nil {
		return nil, err
	}
	res := &Result{What: fmt.Sprintf("%s before %s", ctl, pt)}
	w := &controlWatch{ctl: ctl}
	from, err := jobs.Open(p.Reader) // another process's
	if err != nil {
		return nil, err
	}
	var out outcome
	driven, err := h.inProcess(ctx, p, ids, pt, w, func() { w.ask(ctx, from) }, &out, res)
	if err != nil {
		return nil, err
	}
	if driven != nil && !pt.Mode.Pauses() {
		out.errs = append(out.errs, driven) // a run without a fault ends well
	}
	for _, err := range out.errs {
		res.Violations = append(res.Violations, err.Error())
	}
	if err := finish(ctx, p, ids, h.Variant, w, &out); err != nil {
		res.Violations = append(res.Violations, err.Error())
	}
	interruptions := 0
	if pt.Mode.Pauses() {
		interruptions = 1
	}
	check(p, sd, interruptions, &out, res)
	w.check(ctx, from, res)
	return res, nil
}
