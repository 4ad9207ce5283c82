package jobs

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Describe says in one line what a job of this spec does, for logs and the
// change log: "restore ready records where reason=failed that match
// $.order.id = "ord-7" (at most 10) at 50/s into orders".
func (s *Spec) Describe() string {
	var b strings.Builder
	area := s.Area
	if area == "" {
		area = "ready"
	}
	fmt.Fprintf(&b, "restore %s records", area)
	if len(s.Where) > 0 {
		var kv []string
		for k, v := range s.Where {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		fmt.Fprintf(&b, " where %s", strings.Join(kv, ", "))
	}
	if s.Select != "" {
		fmt.Fprintf(&b, " that match %s", s.Select)
	}
	if s.JQ != "" {
		fmt.Fprintf(&b, " through jq %s", s.JQ)
		if s.JQKeepLayout {
			b.WriteString(" (layout kept)")
		}
	}
	if !s.Since.IsZero() {
		fmt.Fprintf(&b, " since %s", s.Since.Format(time.RFC3339))
	}
	if !s.Until.IsZero() {
		fmt.Fprintf(&b, " until %s", s.Until.Format(time.RFC3339))
	}
	if len(s.Segments) > 0 {
		fmt.Fprintf(&b, " of %d segments", len(s.Segments))
	}
	if s.Limit > 0 {
		fmt.Fprintf(&b, " (at most %d)", s.Limit)
	}
	if s.Rate > 0 {
		fmt.Fprintf(&b, " at %g/s", s.Rate)
	}
	dest := s.Destination
	if dest == "" {
		dest = "(default)"
	}
	fmt.Fprintf(&b, " into %s", dest)
	return b.String()
}
