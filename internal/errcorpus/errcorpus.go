// Package errcorpus makes a dump of dead letters whose errors fall in ten
// families with variable parts (numbers, ids, hex, UUIDs, quoted values,
// URLs, e-mail and network addresses), for the tests, benchmarks and
// screenshots of error groups.
package errcorpus

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Family is an error message with variable parts, its signature, and how
// many records of it the corpus holds.
type Family struct {
	Msg       func(r *rand.Rand) string
	Signature string
	Count     int
}

// Families are the ten families, largest first; the first is the 10,050
// timeouts whose milliseconds made the console's chart of exact strings
// show 16 records per bar.
var Families = []Family{
	{func(r *rand.Rand) string { return fmt.Sprintf("payment gateway timeout after %dms", 100+r.IntN(5000)) },
		"payment gateway timeout after <num>ms", 10050},
	{func(r *rand.Rand) string { return fmt.Sprintf("order ord-%07d not found", r.IntN(1e7)) }, "order ord-<num> not found", 700},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("dial tcp 10.%d.%d.%d:5432: connect: connection refused", r.IntN(256), r.IntN(256), r.IntN(256))
	}, "dial tcp <ip>: connect: connection refused", 400},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("request %08x-%04x-4%03x-a%03x-%012x failed: upstream 503", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Int64N(1<<48))
	}, "request <uuid> failed: upstream <num>", 300},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("card declined for u%d.smith@shop.example.org", r.IntN(1e6))
	},
		"card declined for <email>", 250},
	{func(r *rand.Rand) string {
		return fmt.Sprintf(`invalid field "%s": want a number`, []string{"amount", "qty", "price", "total"}[r.IntN(4)])
	}, "invalid field <str>: want a number", 200},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("event evt_%016x rejected by schema v%d", r.Uint64()|1<<60, 1+r.IntN(9))
	},
		"event evt_<hex> rejected by schema v<num>", 150},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("GET https://api.example.com/v1/orders/%d returned %d", r.IntN(1e6), 500+r.IntN(4))
	}, "GET <url> returned <num>", 100},
	{func(*rand.Rand) string { return "deadline exceeded" }, "deadline exceeded", 75},
	{func(r *rand.Rand) string {
		return fmt.Sprintf("lookup host-%d.internal:%d: no such host", r.IntN(99), 8000+r.IntN(99))
	},
		"lookup <addr>: no such host", 25},
}

// Without is how many records of the corpus have no error header.
const Without = 30

// Total is how many records the corpus holds.
func Total() int {
	n := Without
	for _, f := range Families {
		n += f.Count
	}
	return n
}

// Record is a record of the corpus.
type Record struct {
	Time    time.Time
	Headers map[string]string
	Payload []byte
}

// Records returns the corpus's records, oldest first, over span from
// start: each with the headers reason and source, and error but for
// Without of them; their payloads are JSON orders,
// {"n":i,"order":{"id":"ord-…","email":"Customer…@Example.COM"},"amount":…}.
// The timeouts come in a burst around two thirds of the span, the order
// lookups grow over it, the others are spread evenly.
func Records(start time.Time, span time.Duration) []Record {
	r := rand.New(rand.NewPCG(1, 2))
	var out []Record
	at := func(fi int) time.Time {
		u := r.Float64()
		switch fi {
		case 0:
			u = min(max(0.62+r.NormFloat64()*0.08, 0), 0.999)
		case 1:
			u = math.Sqrt(u)
		}
		return start.Add(time.Duration(u * float64(span)))
	}
	for fi, f := range Families {
		for range f.Count {
			out = append(out, Record{Time: at(fi), Headers: map[string]string{dlqdump.HeaderError: f.Msg(r)}})
		}
	}
	for range Without {
		out = append(out, Record{Time: at(-1), Headers: map[string]string{}})
	}
	slices.SortStableFunc(out, func(a, b Record) int { return a.Time.Compare(b.Time) })
	for i := range out {
		h := out[i].Headers
		h[dlqdump.HeaderReason] = "failed"
		h[dlqdump.HeaderSource] = []string{"orders", "billing"}[i%2]
		out[i].Payload = fmt.Appendf(nil, `{"n":%d,"order":{"id":"ord-%07d","email":"Customer%d@Example.COM"},"amount":%d.%02d}`, i, r.IntN(1e7), i, r.IntN(500), r.IntN(100))
	}
	return out
}

// Write writes the corpus (Records(start, span)) into the ready area of
// rd, in segments of perSegment records with summaries, and returns their
// names.
func Write(ctx context.Context, rd sink.Reader, start time.Time, span time.Duration, perSegment int) ([]string, error) {
	recs := Records(start, span)
	var names []string
	for len(recs) > 0 {
		n := min(perSegment, len(recs))
		part := recs[:n]
		recs = recs[n:]
		created := part[0].Time
		id := segment.NewID(created)
		name := segment.FileName(created, id)
		sw, err := rd.Create(ctx, sink.AreaReady, name)
		if err != nil {
			return names, err
		}
		w, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, &segment.WriterOptions{Summarize: true})
		if err != nil {
			return names, err
		}
		for _, rec := range part {
			if err := w.Add(rec.Time, rec.Headers, rec.Payload); err != nil {
				return names, err
			}
		}
		if err := w.Close(); err != nil {
			return names, err
		}
		if err := sw.Commit(ctx); err != nil {
			return names, err
		}
		names = append(names, name)
	}
	return names, nil
}
