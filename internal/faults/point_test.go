package faults

import (
	"slices"
	"testing"
)

func TestPointRoundTrip(t *testing.T) {
	for _, p := range []Point{
		{Op: OpCommit, K: 3, Mode: Lost},
		{Op: OpPutObject, K: 1, Mode: Fail},
		{Op: OpWrite, K: 120, Mode: CrashAfter},
		{Op: OpSync, K: 7, Mode: Stall},
		{Op: OpCreate, K: 2, Mode: Crash},
	} {
		got, err := ParsePoint(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePoint(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, bad := range []string{"", "Segment.Commit", "Segment.Commit#0/fail", "Segment.Commit#x/fail", "#1/fail", "Segment.Commit#1/boom"} {
		if _, err := ParsePoint(bad); err == nil {
			t.Errorf("ParsePoint(%q) succeeded", bad)
		}
	}
}

func TestSampleK(t *testing.T) {
	for _, tc := range []struct {
		n, spread int
		want      []int
	}{
		{0, 2, nil},
		{1, 2, []int{1}},
		{2, 2, []int{1, 2}},
		{10, 0, []int{1, 10}},
		{10, 2, []int{1, 4, 7, 10}},
		{4, 5, []int{1, 2, 3, 4}},
	} {
		if got := SampleK(tc.n, tc.spread); !slices.Equal(got, tc.want) {
			t.Errorf("SampleK(%d, %d) = %v, want %v", tc.n, tc.spread, got, tc.want)
		}
	}
}

func TestAllAndSample(t *testing.T) {
	c := Counts{OpWrite: 3, OpCommit: 1, OpSync: 0}
	all := All(c, Fail, Lost)
	if len(all) != 8 {
		t.Fatalf("All: %d points, want 8: %v", len(all), all)
	}
	if all[0] != (Point{Op: OpCommit, K: 1, Mode: Fail}) || all[7] != (Point{Op: OpWrite, K: 3, Mode: Lost}) {
		t.Fatalf("All is not ordered by operation, K, mode: %v", all)
	}
	if s := Sample(c, 0, Crash); len(s) != 3 {
		t.Fatalf("Sample(spread 0): %v, want Commit#1, Write#1, Write#3", s)
	}
	if c.Total() != 4 || !slices.Equal(c.Ops(), []Op{OpCommit, OpWrite}) {
		t.Fatalf("Total %d, Ops %v", c.Total(), c.Ops())
	}
}
