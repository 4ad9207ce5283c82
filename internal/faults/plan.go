package faults

import (
	"slices"
	"sort"
)

// Counts holds how many calls of each Op a run made.
type Counts map[Op]int

// Ops returns the operations, sorted.
func (c Counts) Ops() []Op {
	ops := make([]Op, 0, len(c))
	for op, n := range c {
		if n > 0 {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	return ops
}

// Total returns the number of calls.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// All returns every point of c: for each Op, sorted, every K from 1 to its
// count, in each mode.
func All(c Counts, modes ...Mode) []Point {
	var out []Point
	for _, op := range c.Ops() {
		for k := 1; k <= c[op]; k++ {
			for _, m := range modes {
				out = append(out, Point{Op: op, K: k, Mode: m})
			}
		}
	}
	return out
}

// Sample returns a deterministic subset of All: for each Op its first and
// last call and up to spread more spread evenly between them, in each mode.
func Sample(c Counts, spread int, modes ...Mode) []Point {
	var out []Point
	for _, op := range c.Ops() {
		for _, k := range SampleK(c[op], spread) {
			for _, m := range modes {
				out = append(out, Point{Op: op, K: k, Mode: m})
			}
		}
	}
	return out
}

// SampleK returns 1, n and up to spread values evenly between them, sorted
// and without repeats.
func SampleK(n, spread int) []int {
	if n <= 0 {
		return nil
	}
	set := map[int]bool{1: true, n: true}
	for i := 1; i <= spread; i++ {
		set[1+(n-1)*i/(spread+1)] = true
	}
	ks := make([]int, 0, len(set))
	for k := range set {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}
