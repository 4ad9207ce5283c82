package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// segmentJSON is a segment on the page.
type segmentJSON struct {
	Name      string `json:"name"`
	Area      string `json:"area"`
	State     string `json:"state"` // ready, claimed, quarantined, archived
	Size      int64  `json:"size"`
	Records   uint64 `json:"records"`
	Raw       uint64 `json:"raw"`
	Version   string `json:"version,omitempty"`
	First     string `json:"first,omitempty"`
	Last      string `json:"last,omitempty"`
	Encrypted string `json:"encrypted"`
	Sealed    bool   `json:"sealed"`
	// Reason is why a quarantined segment was moved aside whole, in full;
	// RecordReasons counts the reasons its records carry (a segment of
	// single records set aside), when read.
	Reason        string            `json:"reason,omitempty"`
	RecordReasons map[string]uint64 `json:"record_reasons,omitempty"`
	// Claim is its claim record: who holds it (or held it last), until
	// when, how far its restore got.
	Claim *claimJSON `json:"claim,omitempty"`
	Note  string     `json:"note,omitempty"`
	// Damage lists what is damaged; Error an error reading it.
	Damage []string `json:"damage,omitempty"`
	Error  string   `json:"error,omitempty"`
}

type claimJSON struct {
	*inspect.ClaimJSON
	Until string `json:"until,omitempty"`
}

// quarReasons keeps the reasons read from quarantined segments' records.
type quarReasons = lru[map[string]uint64]

func (h *Handler) segmentOf(s *inspect.Summary) segmentJSON {
	j := segmentJSON{Name: s.Info.Name, Area: s.Info.Area.String(), State: s.State(), Size: s.Info.Size, Records: s.Records, Raw: s.Raw,
		First: inspect.JSONTime(s.MinT), Last: inspect.JSONTime(s.MaxT), Encrypted: s.Enc.String(), Sealed: s.Sealed, Reason: s.Info.Reason}
	if s.Read {
		j.Version = dlqdump.Version(s.Hdr.DataVersion).String()
	}
	if s.Claim != nil {
		j.Claim = &claimJSON{ClaimJSON: s.Claim.JSON(s.Records, s.Read), Until: inspect.JSONTime(s.Claim.Until(30 * time.Second))}
		j.Note = s.Claim.Note(s.Info.Area, s.Records, s.Read)
	}
	for _, d := range s.Damage {
		j.Damage = append(j.Damage, d.Error())
	}
	if s.Err != nil {
		j.Error = s.Err.Error()
	}
	return j
}

// handleSegments serves a page of an area's segments, oldest first:
// area=ready|quarantine|archive, after=NAME (the last of the previous page),
// n=100 (at most 500).
func (h *Handler) handleSegments(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	areas, err := parseAreas(v.Get("area"))
	if err != nil || len(areas) != 1 {
		writeError(w, http.StatusBadRequest, "area: want ready, quarantine or archive")
		return
	}
	area := areas[0]
	n := 100
	if s := v.Get("n"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "n %q: want 1 to 500", s)
			return
		}
	}
	after := v.Get("after")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	recs := map[string]bool{}
	for name, err := range h.rd.RecordNames(ctx) {
		if err != nil {
			writeError(w, statusOf(err), "list the claim records: %v", err)
			return
		}
		recs[name] = true
	}
	out := struct {
		Segments []segmentJSON `json:"segments"`
		Next     string        `json:"next,omitempty"`
	}{Segments: []segmentJSON{}}
	deadline := time.Now().Add(h.o.SearchBudget)
	for si, err := range h.rd.List(ctx, area) {
		if err != nil {
			writeError(w, statusOf(err), "list %s: %v", area, err)
			return
		}
		if si.Name <= after && after != "" {
			continue
		}
		if len(out.Segments) == n {
			out.Next = out.Segments[n-1].Name
			break
		}
		var cv *inspect.Claim
		if recs[si.Name] {
			cv, _ = h.in.Inspect(ctx, si)
		}
		j := h.segmentOf(h.summary(ctx, si, cv))
		if area == sink.AreaQuarantine && si.Reason == "" {
			j.RecordReasons = h.recordReasons(ctx, si, cv, deadline)
		}
		out.Segments = append(out.Segments, j)
	}
	writeJSON(w, http.StatusOK, out)
}

// recordReasons returns the reasons the records of a quarantined segment
// carry, read once (while the deadline allows); nil when not read.
func (h *Handler) recordReasons(ctx context.Context, si sink.Info, cv *inspect.Claim, deadline time.Time) map[string]uint64 {
	k := keyOf(si)
	if m, ok := h.reasons.get(k); ok {
		return m
	}
	if time.Now().After(deadline) {
		return nil
	}
	q, err := h.walker.ScanQuarantined(ctx, si, cv, func(error) {})
	if err != nil || q.Sealed {
		return nil
	}
	h.reasons.put(k, q.Reasons)
	return q.Reasons
}
