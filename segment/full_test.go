package segment

import "os"

// fullRun tells whether the sweeps and the million-record round trip run in
// full rather than CI's deterministic sample: DLQDUMP_FULL=1
// (cmd/dlqdump-reliability's "full tests" section sets it and lists the
// tests that read it) or DLQDUMP_SEGMENT_FULL=1.
func fullRun() bool {
	return os.Getenv("DLQDUMP_FULL") != "" || os.Getenv("DLQDUMP_SEGMENT_FULL") != ""
}

// cuts returns the lengths to truncate s to: every one with fullRun, else
// CI's sample: every length in the file header (up to the first block's
// header's end), within 8 bytes of each block header, and in the footer and
// trailer, where the structure is parsed, and every 7th length elsewhere.
// The segment's own length (no damage) is not among them.
func (s *sweepSegment) cuts() []int64 {
	size := int64(len(s.data))
	full := fullRun()
	var out []int64
	for cut := range size {
		keep := full || cut%7 == 0 || cut >= s.footer-8
		if len(s.blocks) > 0 && cut <= s.blocks[0].off+BlockHeaderSize+8 {
			keep = true
		}
		for _, b := range s.blocks {
			if cut >= b.off-8 && cut <= b.off+BlockHeaderSize+8 {
				keep = true
			}
		}
		if keep {
			out = append(out, cut)
		}
	}
	return out
}

// flipSets is how many sets of flipped bits a sweep tries: n in full, a
// quarter of them (the first of the same sequence, every kind of damage
// bitFlips makes) in CI.
func flipSets(n int) int {
	if fullRun() {
		return n
	}
	return n / 4
}
