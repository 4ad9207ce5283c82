package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/transform"
)

// jqFlags are the flags of a transform on replay: restore --jq, job
// create --jq.
type jqFlags struct {
	expr   string
	sample int
	keep   bool // --jq-keep-layout
}

func (f *jqFlags) register(fl *pflag.FlagSet, dry bool) {
	fl.StringVar(&f.expr, "jq", "", `change each record on its way with this jq program, e.g. '.payload.email |= ascii_downcase' (the record is {"id","time","headers","payload"}; a record it fails on is quarantined with the error; the stored record never changes)`)
	fl.BoolVar(&f.keep, "jq-keep-layout", false, "with --jq: deliver the payloads the program changes with their stored bytes but for what it changes (key order, spacing, escapes kept: the same JSON value), not as gojq writes them (keys sorted, compact); a simple field fix costs a fraction of it")
	if dry {
		fl.IntVar(&f.sample, "sample", 3, "with --dry-run and --jq: show a diff of this many records before and after")
	}
}

// compile returns the program of --jq, nil without one; one that does not
// compile is a usage error naming the column.
func (f *jqFlags) compile() (*transform.JQ, error) {
	if f.expr == "" {
		if f.keep {
			return nil, usageErrorf("--jq-keep-layout: without --jq there is no program to run")
		}
		return nil, nil
	}
	j, err := transform.CompileJQ(f.expr, &transform.Options{KeepLayout: f.keep})
	if err != nil {
		var e *transform.Error
		if errors.As(err, &e) && e.Caret() != "" {
			return nil, usageErrorf("--jq: %v\n  %s", err, strings.ReplaceAll(e.Caret(), "\n", "\n  "))
		}
		return nil, usageErrorf("--jq: %v", err)
	}
	if f.sample < 0 {
		return nil, usageErrorf("--sample %d: want 0 or more", f.sample)
	}
	return j, nil
}

// printChanges prints a dry run's sample of what its transform does: a
// unified diff per record changed, the error of each it would quarantine.
func printChanges(w io.Writer, rep *dlqdump.Report, sample int) {
	if sample == 0 {
		return
	}
	if len(rep.Changes) == 0 {
		fmt.Fprintln(w, "the transform changed no record")
		return
	}
	what := "record"
	if n := len(rep.Changes); n > 1 {
		what = fmt.Sprintf("%d records", n)
	}
	fmt.Fprintf(w, "the transform, on the first %s it changes or refuses:\n", what)
	for _, c := range rep.Changes {
		if c.Err != "" {
			fmt.Fprintf(w, "would quarantine %s: transform: %s\n", c.Before.ID, c.Err)
			continue
		}
		fmt.Fprint(w, transform.Diff(&c.Before, &c.After))
	}
}
