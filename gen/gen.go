// Package gen generates realistic dead letters for tests and benchmarks
// (this module's and the bench module's):
// JSON events with random ids, timestamps, names, amounts, nested objects and
// free text, deterministic for a seed. Compression figures measured on them
// are close to those of production dead letters, unlike padded or repeated
// data, which compresses 5-10x faster.
package gen

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"
)

var (
	firstNames = []string{"Maria", "Ivan", "Wei", "Aisha", "Lukas", "Sofia", "Kenji", "Olga", "Mateo", "Fatima", "Noah", "Elena", "Ravi", "Chloe", "Dmitri", "Amara", "Jonas", "Yuki", "Pedro", "Leila"}
	lastNames  = []string{"Ivanova", "Smith", "Chen", "Khan", "Muller", "Rossi", "Tanaka", "Petrov", "Garcia", "Haddad", "Brown", "Novak", "Sharma", "Dubois", "Sokolov", "Okafor", "Berg", "Sato", "Silva", "Farah"}
	domains    = []string{"example.com", "mail.test", "corp.example", "shop.example.org", "inbox.test"}
	types      = []string{"order.created", "order.paid", "payment.failed", "invoice.sent", "user.signup", "cart.abandoned", "shipment.delayed", "refund.requested"}
	currencies = []string{"EUR", "USD", "GBP", "JPY", "RUB", "CNY"}
	errs       = []string{"timeout after 5s", "connection reset by peer", "503 service unavailable", "deadline exceeded", "validation failed: amount", "upstream returned 429", "context canceled"}
	words      = []string{"the", "order", "was", "delayed", "because", "payment", "provider", "returned", "an", "error", "customer", "asked", "for", "refund", "after", "delivery", "window", "missed", "please", "retry", "later", "warehouse", "stock", "low", "address", "invalid", "postal", "code", "courier", "pickup", "scheduled", "tomorrow", "morning", "invoice", "number", "mismatch", "discount", "applied", "twice"}
)

// Generator makes events. It is not safe for concurrent use.
type Generator struct {
	rng *rand.Rand
	t   time.Time
	buf []byte
}

// New returns a generator for the given seed.
func New(seed uint64) *Generator {
	return &Generator{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		t:   time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC),
	}
}

// Event returns a new JSON event of about size bytes (at least ~120): larger
// sizes get more line items and a longer note. The slice is freshly allocated.
func (g *Generator) Event(size int) []byte {
	r := g.rng
	g.t = g.t.Add(time.Duration(r.IntN(50_000)) * time.Microsecond)
	b := g.buf[:0]
	b = append(b, `{"id":"evt_`...)
	b = g.hex(b, 8)
	b = append(b, `","ts":"`...)
	b = g.t.AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","type":"`...)
	b = append(b, types[r.IntN(len(types))]...)
	b = append(b, `","user":{"id":`...)
	b = strconv.AppendInt(b, int64(r.IntN(9_000_000)+100_000), 10)
	fn, ln := firstNames[r.IntN(len(firstNames))], lastNames[r.IntN(len(lastNames))]
	b = append(b, `,"name":"`...)
	b = append(b, fn...)
	b = append(b, ' ')
	b = append(b, ln...)
	b = append(b, `","email":"`...)
	b = append(b, fn[0]|0x20, '.')
	b = append(b, ln...)
	b = strconv.AppendInt(b, int64(r.IntN(100)), 10)
	b = append(b, '@')
	b = append(b, domains[r.IntN(len(domains))]...)
	b = append(b, `"},"amount":{"value":`...)
	b = strconv.AppendFloat(b, float64(r.IntN(1_000_000))/100, 'f', 2, 64)
	b = append(b, `,"currency":"`...)
	b = append(b, currencies[r.IntN(len(currencies))]...)
	b = append(b, `"},"attempt":`...)
	b = strconv.AppendInt(b, int64(r.IntN(6)), 10)
	b = append(b, `,"error":"`...)
	b = append(b, errs[r.IntN(len(errs))]...)
	b = append(b, `","items":[`...)
	for i := 0; len(b) < size-60; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"sku":"SKU-`...)
		b = strconv.AppendInt(b, int64(r.IntN(99_999)), 10)
		b = append(b, `","qty":`...)
		b = strconv.AppendInt(b, int64(r.IntN(9)+1), 10)
		b = append(b, '}')
		if len(b) >= size-60 {
			break
		}
	}
	b = append(b, ']')
	if len(b) < size-12 {
		b = append(b, `,"note":"`...)
		for n := 0; len(b) < size-3 || n == 0; n++ {
			if n > 0 {
				b = append(b, ' ')
			}
			b = append(b, words[r.IntN(len(words))]...)
		}
		b = append(b, '"')
	}
	b = append(b, '}')
	g.buf = b
	return append([]byte(nil), b...)
}

// Small returns a small event of about 64 bytes: an id, a type and a time.
func (g *Generator) Small() []byte {
	r := g.rng
	g.t = g.t.Add(time.Duration(r.IntN(50_000)) * time.Microsecond)
	b := g.buf[:0]
	b = append(b, `{"id":"`...)
	b = g.hex(b, 6)
	b = append(b, `","t":"`...)
	b = append(b, types[r.IntN(len(types))]...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, g.t.UnixMilli(), 10)
	b = append(b, '}')
	g.buf = b
	return append([]byte(nil), b...)
}

// Events returns n events of about size bytes each; size <= 64 gives Small
// events.
func (g *Generator) Events(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		if size <= 64 {
			out[i] = g.Small()
		} else {
			out[i] = g.Event(size)
		}
	}
	return out
}

func (g *Generator) hex(b []byte, n int) []byte {
	var raw [16]byte
	for i := range n {
		raw[i] = byte(g.rng.Uint32())
	}
	return hex.AppendEncode(b, raw[:n])
}
