package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/jobs"
)

// JobWaiting says why a due job has not started, from the runners'
// heartbeats: none runs, or none serves its destination; "" when it is not
// due, or a runner that serves it lives.
func JobWaiting(ctx context.Context, st *jobs.Store, j *jobs.Job) string {
	if j.State != jobs.Pending || j.Due().After(time.Now()) {
		return ""
	}
	var runners []jobs.RunnerInfo
	for ri, err := range st.Runners(ctx) {
		if err == nil {
			runners = append(runners, ri)
		}
	}
	return JobWaitingAmong(j, runners)
}

// JobWaitingAmong is JobWaiting with the runners' heartbeats read already.
func JobWaitingAmong(j *jobs.Job, runners []jobs.RunnerInfo) string {
	if j.State != jobs.Pending || j.Due().After(time.Now()) {
		return ""
	}
	var live, serving int
	now := time.Now()
	for _, ri := range runners {
		if !ri.Live(now) {
			continue
		}
		live++
		if ri.Serves(j.Spec.Destination) {
			serving++
		}
	}
	switch {
	case live == 0:
		return "due, and no runner has been heard from lately (dlqdump job run, or a program's jobs.Runner)"
	case serving == 0:
		return fmt.Sprintf("due, and none of the %d runners heard from lately serves destination %q", live, j.Spec.Destination)
	}
	return ""
}
