package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// A search walks the selected areas, segments by name, records in order,
// from its cursor; it stops once it has a page, or its budget of time is
// spent, and says where to go on. It holds one block and the page in
// memory, whatever the store's size: a sealed segment outside the time
// range is skipped by its footer, a block outside it by the footer's index,
// and the next page seeks straight to its block.

// hit is what a search found: a record, or a block of an encrypted segment
// whose records cannot be read (rec nil).
type hit struct {
	si     sink.Info
	hdr    *segment.Header
	rec    *segment.Record
	sealed segment.BlockInfo
	enc    inspect.Encryption
}

// scanResult says how far a search got.
type scanResult struct {
	// Selection is the search's selection as an expression (its
	// parameters ANDed): what "Restore this selection" restores.
	Selection string `json:"selection"`
	Next      string `json:"next,omitempty"` // cursor of the next page; "" at the end
	Scanned   uint64 `json:"scanned"`        // records looked at
	Segments  int    `json:"segments"`       // segments opened
	// Unsearched counts the records of encrypted segments no key opens,
	// which a filter on headers or payloads could not look at.
	Unsearched uint64 `json:"unsearched,omitempty"`
	// Skipped counts the segments, SkippedBlocks the blocks of segments
	// read, that what their header, footer and summary say ruled out
	// without reading them.
	Skipped       int      `json:"skipped_segments"`
	SkippedBlocks int      `json:"skipped_blocks"`
	Done          bool     `json:"done"`
	TookMS        int64    `json:"took_ms"`
	Errors        []string `json:"errors,omitempty"`
}

// errPageFull ends a walk once the page is full or the budget spent.
var errPageFull = errors.New("page full")

// scan calls emit for each record the query selects, from its cursor on,
// until emit returns false (the page is full) or budget is spent.
func (h *Handler) scan(ctx context.Context, q *query, budget time.Duration, emit func(hit) bool) scanResult {
	// At most a few searches at once, each with its read-ahead: the others
	// wait their turn (and their budget starts then).
	select {
	case h.scans <- struct{}{}:
		defer func() { <-h.scans }()
	case <-ctx.Done():
		return scanResult{Errors: []string{ctx.Err().Error()}, Next: q.after.String()}
	}
	start := time.Now()
	deadline := start.Add(budget)
	res := scanResult{Selection: q.sel.String()}
	recs := map[string]bool{}
	for n, err := range h.rd.RecordNames(ctx) {
		if err != nil {
			res.Errors = append(res.Errors, "list the claim records: "+err.Error())
			break
		}
		recs[n] = true
	}
	onlyTime := !q.sel.Records()
	stopAt := func(c cursor) scanResult {
		res.Next = c.String()
		res.TookMS = time.Since(start).Milliseconds()
		return res
	}
	for ai, area := range q.areas {
		if q.after.set && slices.Index(q.areas, q.after.area) > ai {
			continue
		}
		for info, err := range h.list(ctx, area) {
			if err != nil {
				res.Errors = append(res.Errors, "list "+area.String()+": "+err.Error())
				break
			}
			name := info.Name
			if q.segments != nil && !q.segments[name] {
				continue
			}
			from := uint64(0)
			if q.after.set && q.after.area == area {
				if name < q.after.name || name == q.after.name && q.after.seq == pastSegment {
					continue
				}
				if name == q.after.name {
					from = q.after.seq
				}
			}
			if time.Now().After(deadline) {
				return stopAt(cursor{set: true, area: area, name: name, seq: from})
			}
			if !q.sel.IsAll() {
				// What its header, footer and summary say may rule
				// it out without reading a block.
				if p := h.plan(ctx, info); p != nil && q.sel.SkipSegment(p.segment(info)) {
					res.Skipped++
					continue
				}
			}
			var cv *inspect.Claim
			if recs[name] && area != sink.AreaArchive {
				cv, _ = h.in.Inspect(ctx, info)
			}
			res.Segments++
			var next cursor
			var enc inspect.Encryption
			st, err := h.walker.Walk(ctx, info, inspect.WalkOpts{Select: q.sel, Done: cv, From: from, Stream: &segment.StreamOptions{},
				Opened: func(sr *segment.Reader) { enc = inspect.EncryptionOf(sr) },
				Sealed: func(bi segment.BlockInfo) error {
					if !onlyTime {
						res.Unsearched += uint64(bi.Count)
						return nil
					}
					res.Scanned += uint64(bi.Count)
					next = cursor{set: true, area: area, name: name, seq: bi.FirstSeq + uint64(bi.Count)}
					if !emit(hit{si: info, sealed: bi, enc: enc}) {
						return errPageFull
					}
					return nil
				}}, func(hdr *segment.Header, b *segment.Block) error {
				seg := inspect.SegmentOf(info, hdr)
				for i := range b.Len() {
					rec := b.Record(i)
					if rec.Seq < from || cv.Skip(rec.Seq) {
						continue
					}
					res.Scanned++
					if !q.sel.Match(seg, &rec) {
						continue
					}
					if !emit(hit{si: info, hdr: hdr, rec: &rec, enc: enc}) {
						next = cursor{set: true, area: area, name: name, seq: rec.Seq + 1}
						return errPageFull
					}
				}
				if time.Now().After(deadline) {
					bi := b.Info()
					next = cursor{set: true, area: area, name: name, seq: bi.FirstSeq + uint64(bi.Count)}
					return errPageFull
				}
				return nil
			}, func(err error) { res.Errors = append(res.Errors, err.Error()) })
			res.SkippedBlocks += st.SkippedBlocks
			switch {
			case errors.Is(err, errPageFull):
				return stopAt(next)
			case err != nil && ctx.Err() != nil:
				res.Errors = append(res.Errors, err.Error())
				return stopAt(cursor{set: true, area: area, name: name, seq: from})
			case err != nil && !errors.Is(err, sink.ErrNotFound):
				res.Errors = append(res.Errors, err.Error())
			}
		}
	}
	res.Done = true
	res.TookMS = time.Since(start).Milliseconds()
	return res
}

// recordJSON is a record on the page.
type recordJSON struct {
	ID      string            `json:"id,omitempty"` // its dlqdump.RecordID
	Segment string            `json:"segment"`
	Area    string            `json:"area"`
	Seq     uint64            `json:"seq"`
	Time    string            `json:"time"`
	Headers map[string]string `json:"headers,omitempty"`
	Payload *payloadJSON      `json:"payload,omitempty"`
	// A block of an encrypted segment no key opens: its records' count
	// and time range, and the kinds of recipient its key is wrapped for.
	Sealed    bool   `json:"sealed,omitempty"`
	Count     uint32 `json:"count,omitempty"`
	Last      string `json:"last,omitempty"`
	Encrypted string `json:"encrypted,omitempty"`
}

// payloadJSON is a payload as the page shows it: Kind json (pretty
// printed), protojson, text or hex, its Text, always shown as text.
type payloadJSON struct {
	Kind      string `json:"kind"`
	Text      string `json:"text"`
	Size      int    `json:"size"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}

const (
	previewLen = 300     // bytes of a payload in a page
	detailLen  = 1 << 20 // bytes of a payload in a record's view
	hexLen     = 64 << 10
)

// cut shortens s to at most n bytes at a character boundary.
func cut(s []byte, n int) ([]byte, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// formatPayload formats a payload: protojson (given a descriptor), JSON,
// text or hex; pretty for a record's view, on one line for a page.
func (h *Handler) formatPayload(p []byte, pretty bool) *payloadJSON {
	out := &payloadJSON{Size: len(p)}
	limit := previewLen
	if pretty {
		limit = detailLen
	}
	var js []byte
	if h.proto != nil {
		var warn string
		var err error
		if js, warn, err = h.proto.Format(p); err == nil {
			out.Kind, out.Error = "protojson", warn
		} else {
			out.Error = err.Error()
		}
	}
	if js == nil && json.Valid(p) && len(bytes.TrimSpace(p)) > 0 {
		js, out.Kind = p, "json"
	}
	switch {
	case js != nil:
		var buf bytes.Buffer
		if pretty {
			_ = json.Indent(&buf, js, "", "  ")
		} else {
			_ = json.Compact(&buf, js)
		}
		b, tr := cut(buf.Bytes(), limit)
		out.Text, out.Truncated = string(b), tr
	case len(p) == 0:
		out.Kind = "empty"
	case inspect.Printable(p):
		b, tr := cut(p, limit)
		out.Kind, out.Text, out.Truncated = "text", string(b), tr
	default:
		out.Kind = "hex"
		n := min(len(p), hexLen)
		if !pretty {
			n = min(len(p), 48)
			out.Text = hex.EncodeToString(p[:n])
		} else {
			out.Text = hex.Dump(p[:n])
		}
		out.Truncated = n < len(p)
	}
	return out
}

func (h *Handler) recordOf(x hit, pretty bool) recordJSON {
	if x.rec == nil {
		bi := x.sealed
		return recordJSON{Segment: x.si.Name, Area: x.si.Area.String(), Seq: bi.FirstSeq, Sealed: true, Count: bi.Count,
			Time: inspect.JSONTime(time.Unix(0, bi.MinTime)), Last: inspect.JSONTime(time.Unix(0, bi.MaxTime)), Encrypted: x.enc.String()}
	}
	r := recordJSON{ID: x.hdr.RecordID(x.rec).String(), Segment: x.si.Name, Area: x.si.Area.String(), Seq: x.rec.Seq, Time: inspect.JSONTime(x.rec.When()),
		Headers: inspect.HeadersMap(x.rec.Headers), Payload: h.formatPayload(x.rec.Payload, pretty)}
	if x.enc.On {
		r.Encrypted = x.enc.String()
	}
	return r
}

type recordsJSON struct {
	Records []recordJSON `json:"records"`
	scanResult
}

// handleRecords serves a page of records.
func (h *Handler) handleRecords(w http.ResponseWriter, r *http.Request) {
	q, err := h.parseQuery(r.URL.Query())
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	out := recordsJSON{Records: []recordJSON{}}
	out.scanResult = h.scan(r.Context(), q, h.o.SearchBudget, func(x hit) bool {
		out.Records = append(out.Records, h.recordOf(x, false))
		return len(out.Records) < q.n
	})
	writeJSON(w, http.StatusOK, out)
}

// handleCount counts the records a query selects, for a budget of three
// searches, saying how far it got.
func (h *Handler) handleCount(w http.ResponseWriter, r *http.Request) {
	q, err := h.parseQuery(r.URL.Query())
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	var n uint64
	res := h.scan(r.Context(), q, 3*h.o.SearchBudget, func(x hit) bool {
		if x.rec == nil {
			n += uint64(x.sealed.Count)
		} else {
			n++
		}
		return true
	})
	writeJSON(w, http.StatusOK, struct {
		Count uint64 `json:"count"`
		scanResult
	}{n, res})
}

// handleRecord serves one record in full: area, segment and seq.
func (h *Handler) handleRecord(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	areas, err := parseAreas(v.Get("area"))
	name := v.Get("segment")
	seq, serr := strconv.ParseUint(v.Get("seq"), 10, 64)
	if err != nil || len(areas) != 1 || name == "" || serr != nil {
		writeError(w, http.StatusBadRequest, "want area, segment and seq")
		return
	}
	if err := checkName(name); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	info := sink.Info{Name: name, Area: areas[0]}
	var found *recordJSON
	var enc inspect.Encryption
	_, err = h.walker.Walk(r.Context(), info, inspect.WalkOpts{From: seq,
		Opened: func(sr *segment.Reader) { enc = inspect.EncryptionOf(sr) },
		Sealed: func(bi segment.BlockInfo) error {
			if seq >= bi.FirstSeq && seq < bi.FirstSeq+uint64(bi.Count) {
				j := h.recordOf(hit{si: info, sealed: bi, enc: enc}, true)
				found = &j
				return errPageFull
			}
			return nil
		}}, func(hdr *segment.Header, b *segment.Block) error {
		for i := range b.Len() {
			rec := b.Record(i)
			if rec.Seq == seq {
				j := h.recordOf(hit{si: info, hdr: hdr, rec: &rec, enc: enc}, true)
				found = &j
				return errPageFull
			}
		}
		return nil
	}, func(error) {})
	if err != nil && !errors.Is(err, errPageFull) {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	if found == nil {
		writeError(w, http.StatusNotFound, "segment %s (%s) has no record %d (in an intact block)", name, info.Area, seq)
		return
	}
	writeJSON(w, http.StatusOK, found)
}
