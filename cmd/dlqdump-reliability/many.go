package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// manyRTT is the round trip the proxied run adds to every S3 request, as
// AWS has.
const manyRTT = 20 * time.Millisecond

// manyRestorers runs several restorer processes with the same Owner
// draining one store (package drainers, the code TestRestorersShareAStore
// runs): a directory, a versitygw prefix, and a versitygw prefix behind a
// proxy adding manyRTT to every request; 10,000 segments each, or a few
// hundred with -short. Every record must be delivered exactly once. Each
// S3 run reports its segments/s beside the directory's and the requests per
// segment (counted by a proxy; without added latency for the plain run).
func manyRestorers(o *options) []result {
	const procs, per = 4, 5
	nDir, nS3, nRTT := 10000, 10000, 10000
	if o.short {
		nDir, nS3, nRTT = 500, 100, 100
	}
	child := func() *exec.Cmd { return exec.Command(os.Args[0]) }
	var dirRate float64
	run := func(name string, st drainers.Store, seed sink.Reader, n int, p *s3test.Proxy) result {
		section := "many restorers, " + name
		res, err := drainers.RunSeeded(context.Background(), seed, st, n, per, procs, child, func() {
			if p != nil {
				p.Reset() // the requests of the restorers, not of the seeding
			}
		})
		if err != nil {
			return result{section: section, figures: err.Error(), bound: "run"}
		}
		rate := float64(res.Segments) / res.Took.Seconds()
		figures := fmt.Sprintf("%d processes, same Owner, %d segments, %d records: %.0f records/s (%.0f segments/s) in %s; %d got work; %d lost, %d delivered twice",
			res.Procs, res.Segments, res.Records, res.PerSecond(), rate, res.Took.Round(1e9), res.Busy, res.Lost, res.Twice)
		note := ""
		if dirRate == 0 {
			dirRate = rate
		} else {
			c := p.Counts()
			note = fmt.Sprintf("%.2f× the directory's segments/s; %.1f requests per segment (%s)", rate/dirRate, float64(c.Total())/float64(res.Segments), c.Per(res.Segments))
		}
		return result{section: section, figures: figures, bound: "0 lost, 0 twice", ok: res.OK() && res.Busy > 1, note: note}
	}
	dir, err := os.MkdirTemp("", "dlqdump-many-")
	if err != nil {
		return []result{{section: "many restorers", figures: err.Error(), bound: "run"}}
	}
	defer os.RemoveAll(dir)
	st := drainers.Store{Dir: dir}
	rs := []result{run("directory", st, st.Reader(), nDir, nil)}

	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-reliability"})
	switch {
	case errors.Is(err, s3test.ErrNoVersity):
		return append(rs, result{section: "many restorers, versitygw", figures: "not run: " + err.Error(), bound: "run", ok: os.Getenv("CI") == ""})
	case err != nil:
		return append(rs, result{section: "many restorers, versitygw", figures: err.Error(), bound: "run"})
	}
	defer stop()
	for _, rtt := range []time.Duration{0, manyRTT} {
		name, n := "versitygw", nS3
		if rtt > 0 {
			name, n = fmt.Sprintf("versitygw +%s per request", rtt), nRTT
		}
		p, err := s3test.NewProxy(srv, rtt)
		if err != nil {
			rs = append(rs, result{section: "many restorers, " + name, figures: err.Error(), bound: "run"})
			continue
		}
		prefix := s3test.UniquePrefix("many")
		seed := drainers.Store{S3: srv, Prefix: prefix}.Reader()
		rs = append(rs, run(name, drainers.Store{S3: p.Server(), Prefix: prefix}, seed, n, p))
		_ = p.Close()
	}
	return rs
}
