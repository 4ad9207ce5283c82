package main

import (
	"bufio"
	"fmt"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// explain prints how the selection reads the segments infos: what it
// looks at, and for each segment whether its header, footer and summary
// rule it out, or which of its blocks.
func (a *app) explain(l *location, infos []sink.Info, flt *filter) error {
	w := bufio.NewWriter(a.stdout)
	fmt.Fprint(w, flt.sel.Explain())
	var read, skipped, blocks, readBlocks int
	for _, si := range infos {
		if a.interrupted() {
			break
		}
		seg, sumBytes, err := a.planSegment(l, si)
		if err != nil {
			fmt.Fprintf(w, "read  %s: %v\n", l.segPath(si.Area, si.Name), err)
			read++
			continue
		}
		p := flt.sel.Plan(seg)
		n := 0
		if seg.Footer != nil {
			n = len(seg.Footer.Blocks)
		}
		sum := "no summary"
		if seg.Summary != nil {
			sum = fmt.Sprintf("summary %d bytes", sumBytes)
		}
		switch {
		case p.Skip:
			skipped++
			blocks += n
			fmt.Fprintf(w, "skip  %s: ruled out by %s\n", l.segPath(si.Area, si.Name), p.Why)
		case p.Blocks != nil:
			read++
			blocks += n
			readBlocks += p.Read
			fmt.Fprintf(w, "read  %s: %d of %d blocks (%s)\n", l.segPath(si.Area, si.Name), p.Read, n, sum)
		default:
			read++
			blocks += n
			readBlocks += n
			fmt.Fprintf(w, "read  %s: every block, %d (%s)\n", l.segPath(si.Area, si.Name), n, sum)
		}
	}
	fmt.Fprintf(w, "reads %d of %d segments, %d of %d blocks\n", read, read+skipped, readBlocks, blocks)
	return w.Flush()
}

// planSegment reads what a selection plans a segment with: its header,
// footer and summary (opened with the identities given, when any; without
// them an encrypted segment's summary is not read), and the summary's size.
func (a *app) planSegment(l *location, si sink.Info) (*selection.Segment, int64, error) {
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	ro, err := a.readerOptions(si.Name)
	if err != nil {
		return nil, 0, err
	}
	sr, err := segment.NewReaderContext(a.ctx, f, f.Size(), ro)
	if err != nil {
		ro.Keys = nil
		if sr, err = segment.NewReader(f, f.Size(), ro); err != nil {
			return nil, 0, err
		}
	}
	hdr := sr.Header()
	seg := &selection.Segment{Area: si.Area, Name: si.Name, Header: &hdr, Footer: sr.Footer()}
	seg.Summary, _ = sr.Summary()
	var n int64
	if seg.Footer != nil {
		n = seg.Footer.SummaryBytes
	}
	return seg, n, nil
}

// quarantineHint says so when a location's ready area is empty and its
// quarantine is not: cat printed nothing, and the records are there.
func (a *app) quarantineHint(l *location, loc string) {
	n := 0
	for _, err := range sink.Names(a.ctx, l.reader, sink.AreaQuarantine) {
		if err != nil {
			return
		}
		n++
	}
	if n == 0 {
		return
	}
	segs := "segments are"
	if n == 1 {
		segs = "segment is"
	}
	a.infof("no ready segment in %s, but %d quarantined %s there: dlqdump cat %s --area quarantine (why: dlqdump quarantine ls %s)", l, n, segs, loc, loc)
}
