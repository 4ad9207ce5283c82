package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// durationFlag is a duration flag in the one syntax every flag of the
// command takes: a Go duration (90s, 1h30m) with the units d (24h) and w
// (7d) besides, e.g. 30d or 1d12h, as --since and --until take.
type durationFlag struct{ p *time.Duration }

// durationVar defines a duration flag with that syntax.
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fl.Var(durationFlag{p}, name, usage)
}

// Set parses s.
func (d durationFlag) Set(s string) error {
	v, err := parseAgo(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 90s, 12h, 30d or 1w")
	}
	*d.p = v
	return nil
}

// String returns the duration with days when it is a whole number of them.
func (d durationFlag) String() string {
	if d.p == nil {
		return "0s"
	}
	return fmtDuration(*d.p)
}

// Type names the flag's type in help.
func (durationFlag) Type() string { return "duration" }

// fmtDuration returns d as the flags take it: "30d" for whole days, else
// Go's form.
func fmtDuration(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
