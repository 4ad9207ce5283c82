package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/internal/jobsim"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// restoreJobs runs seed 002's test of restore jobs (package jobsim, the code
// TestJobsSeed002 runs): 10,000 one-off jobs due over 60 s, on a directory
// and on versitygw, run by 4 runner processes of 4 Restorers, 2 of them
// killed and restarted during the run (-short: 400 and 200 jobs). Every job
// must complete once, none before its second, every record delivered once
// (a block twice at most per kill). The start delay is reported beside; its
// goal, p99 under 1 s while runners live, is not a verdict: it measures the
// machine as much as the code.
func restoreJobs(o *options) []result {
	nDir, nS3 := 10000, 10000
	if o.short {
		nDir, nS3 = 400, 200
	}
	child := func() *exec.Cmd { return exec.Command(os.Args[0]) }
	run := func(name string, st drainers.Store, n int) result {
		section := "restore jobs (seed 002), " + name
		span := max(time.Duration(n)*60*time.Second/10000, 8*time.Second)
		res, err := jobsim.Run(context.Background(), jobsim.Options{Store: st, Jobs: n, Records: 5, Span: span,
			Runners: 4, Restorers: 4, Kills: 2, Lease: time.Second, Child: child})
		if err != nil {
			return result{section: section, figures: err.Error(), bound: "run"}
		}
		note := ""
		if len(res.Problems) > 0 {
			note = fmt.Sprint(res.Problems)
		}
		return result{section: section, figures: res.String(),
			bound: "every job completed once, 0 early, 0 records lost, twice within the bound", ok: res.OK(), note: note}
	}
	dir, err := os.MkdirTemp("", "dlqdump-jobs-")
	if err != nil {
		return []result{{section: "restore jobs", figures: err.Error(), bound: "run"}}
	}
	defer os.RemoveAll(dir)
	rs := []result{run("directory", drainers.Store{Dir: dir}, nDir)}

	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-reliability"})
	switch {
	case errors.Is(err, s3test.ErrNoVersity):
		return append(rs, result{section: "restore jobs (seed 002), versitygw", figures: "not run: " + err.Error(), bound: "run", ok: os.Getenv("CI") == ""})
	case err != nil:
		return append(rs, result{section: "restore jobs (seed 002), versitygw", figures: err.Error(), bound: "run"})
	}
	defer stop()
	return append(rs, run("versitygw", drainers.Store{S3: srv, Prefix: s3test.UniquePrefix("jobs")}, nS3))
}
