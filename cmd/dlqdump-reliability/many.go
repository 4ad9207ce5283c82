package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// manyRestorers runs several restorer processes with the same Owner
// draining one store, a directory and a versitygw prefix (package drainers,
// the code TestRestorersShareAStore runs): 10,000 segments each, or a few
// hundred with -short. Every record must be delivered exactly once.
func manyRestorers(o *options) []result {
	const procs, per = 4, 5
	nDir, nS3 := 10000, 10000
	if o.short {
		nDir, nS3 = 500, 100
	}
	child := func() *exec.Cmd { return exec.Command(os.Args[0]) }
	run := func(name string, st drainers.Store, n int) result {
		section := "many restorers, " + name
		res, err := drainers.Run(context.Background(), st, n, per, procs, child)
		if err != nil {
			return result{section: section, figures: err.Error(), bound: "run"}
		}
		return result{section: section,
			figures: fmt.Sprintf("%d processes, same Owner, %d segments, %d records: %.0f records/s (%.0f segments/s) in %s; %d got work; %d lost, %d delivered twice",
				res.Procs, res.Segments, res.Records, res.PerSecond(), float64(res.Segments)/res.Took.Seconds(), res.Took.Round(1e9), res.Busy, res.Lost, res.Twice),
			bound: "0 lost, 0 twice", ok: res.OK() && res.Busy > 1}
	}
	dir, err := os.MkdirTemp("", "dlqdump-many-")
	if err != nil {
		return []result{{section: "many restorers", figures: err.Error(), bound: "run"}}
	}
	defer os.RemoveAll(dir)
	rs := []result{run("directory", drainers.Store{Dir: dir}, nDir)}

	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-reliability"})
	switch {
	case errors.Is(err, s3test.ErrNoVersity):
		return append(rs, result{section: "many restorers, versitygw", figures: "not run: " + err.Error(), bound: "run", ok: os.Getenv("CI") == ""})
	case err != nil:
		return append(rs, result{section: "many restorers, versitygw", figures: err.Error(), bound: "run"})
	}
	defer stop()
	return append(rs, run("versitygw", drainers.Store{S3: srv, Prefix: s3test.UniquePrefix("many")}, nS3))
}
