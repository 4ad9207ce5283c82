package main

import (
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// summary describes one segment (see inspect.Summary).
type summary = inspect.Summary

// summarize reads a segment's header and footer; an unsealed segment is
// scanned block by block.
func (a *app) summarize(l *location, si sink.Info, claim *claimView) *summary {
	return inspect.Summarize(a.ctx, l.reader, si, claim, l.segPath(si.Area, si.Name))
}

// walker reads the records of l's segments with the identities given,
// stopping at the next block after the first interrupt.
func (a *app) walker(l *location) *inspect.Walker {
	return &inspect.Walker{Reader: l.reader, Options: a.readerOptions, Stop: a.soft, Path: l.segPath, KeyHint: keyHint}
}

// walk opens a segment and calls fn for every intact block, in order, and
// damage for every damaged part (see inspect.Walker.Walk).
func (a *app) walk(l *location, si sink.Info, o walkOpts, fn inspect.BlockFunc, damage func(error)) (walkStats, error) {
	return a.walker(l).Walk(a.ctx, si, o, fn, damage)
}

type (
	walkOpts  = inspect.WalkOpts
	walkStats = inspect.WalkStats
)
