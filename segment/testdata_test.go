package segment

import (
	"strconv"
	"time"
)

// This file holds deterministic generators of test data shared by the tests,
// fuzz targets and benchmarks of this package.

// splitmix64 is a tiny, fast and well mixing hash of x: the generators use it
// to derive everything about a record from its sequence number, so tests can
// recompute what they expect instead of keeping it in memory.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// prng is a deterministic pseudo random source (splitmix64 stream).
type prng struct{ s uint64 }

func newPRNG(seed uint64) *prng { return &prng{s: seed} }

func (p *prng) next() uint64 {
	p.s += 0x9e3779b97f4a7c15
	return splitmix64(p.s)
}

// intn returns a number in [0, n).
func (p *prng) intn(n int) int { return int(p.next() % uint64(n)) }

// fill fills b with pseudo random bytes.
func (p *prng) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := p.next()
		for j := i; j < len(b) && j < i+8; j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}

var (
	genFirstNames = []string{"Ada", "Grace", "Linus", "Barbara", "Ken", "Edsger", "Margaret", "Dennis", "Frances", "Alan", "Radia", "Donald", "Hedy", "John", "Sophie", "Niklaus"}
	genLastNames  = []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Dijkstra", "Hamilton", "Ritchie", "Allen", "Turing", "Perlman", "Knuth", "Lamarr", "McCarthy", "Wilson", "Wirth"}
	genDomains    = []string{"example.com", "mail.test", "corp.internal", "shop.example", "eu.example.org"}
	genEvents     = []string{"order.created", "order.paid", "payment.refunded", "invoice.sent", "user.signup", "cart.abandoned", "shipment.delayed", "stock.low"}
	genCurrencies = []string{"EUR", "USD", "GBP", "JPY", "CHF", "SEK"}
	genSkus       = []string{"SKU-1001", "SKU-2042", "SKU-3310", "SKU-4177", "SKU-5005", "SKU-6120", "SKU-7781", "SKU-8899"}
	genWords      = []string{"retry", "upstream", "timeout", "schema", "mismatch", "quota", "exceeded", "gateway", "replica", "lag", "conflict", "stale", "token", "expired"}
	genReasons    = []string{"timeout", "nack", "poison", "max-attempts", "decode-error", "rejected"}
	genSources    = []string{"orders", "payments", "billing", "notifications", "inventory", "search-indexer", "email"}
	genAttempts   = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}
)

const hexDigits = "0123456789abcdef"

func appendHex(dst []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>(uint(i)*4))&15])
	}
	return dst
}

// genBaseTime is the time around which generated records lie.
var genBaseTime = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)

// appendJSONRecord appends a realistic JSON dead letter of exactly size bytes
// (for size >= 2; shorter sizes get a prefix of one) derived from seed: ids,
// timestamps, names, amounts, a nested object and an array, padded to size
// with a trace field. Different seeds give different records.
func appendJSONRecord(dst []byte, seed uint64, size int) []byte {
	start := len(dst)
	r := newPRNG(seed)
	dst = append(dst, `{"id":"`...)
	dst = appendHex(dst, r.next(), 16)
	dst = append(dst, `","ts":"`...)
	ts := genBaseTime.Add(time.Duration(r.intn(int(48 * time.Hour))))
	dst = ts.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","event":"`...)
	dst = append(dst, genEvents[r.intn(len(genEvents))]...)
	first, last := genFirstNames[r.intn(len(genFirstNames))], genLastNames[r.intn(len(genLastNames))]
	dst = append(dst, `","user":{"name":"`...)
	dst = append(dst, first...)
	dst = append(dst, ' ')
	dst = append(dst, last...)
	dst = append(dst, `","email":"`...)
	for i := 0; i < len(first); i++ {
		c := first[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(r.intn(10000)), 10)
	dst = append(dst, '@')
	dst = append(dst, genDomains[r.intn(len(genDomains))]...)
	dst = append(dst, `","id":`...)
	dst = strconv.AppendInt(dst, int64(100000+r.intn(900000)), 10)
	dst = append(dst, `},"order":{"amount":`...)
	dst = strconv.AppendInt(dst, int64(r.intn(100000)), 10)
	dst = append(dst, '.')
	cents := r.intn(100)
	dst = append(dst, byte('0'+cents/10), byte('0'+cents%10))
	dst = append(dst, `,"currency":"`...)
	dst = append(dst, genCurrencies[r.intn(len(genCurrencies))]...)
	dst = append(dst, `","items":[`...)
	for i, n := 0, 1+r.intn(3); i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"sku":"`...)
		dst = append(dst, genSkus[r.intn(len(genSkus))]...)
		dst = append(dst, `","qty":`...)
		dst = strconv.AppendInt(dst, int64(1+r.intn(9)), 10)
		dst = append(dst, '}')
	}
	dst = append(dst, `]},"error":"`...)
	for i, n := 0, 2+r.intn(4); i < n; i++ {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, genWords[r.intn(len(genWords))]...)
	}
	dst = append(dst, '"')
	// Pad with a trace field, or cut, to the exact size.
	if body := len(dst) - start; body+len(`,"trace":""}`) <= size {
		dst = append(dst, `,"trace":"`...)
		for len(dst)-start < size-2 {
			dst = append(dst, hexDigits[r.intn(16)])
		}
		dst = append(dst, `"}`...)
	} else {
		dst = dst[:start+max(size-1, 0)]
		if size > 0 {
			dst = append(dst, '}')
		}
	}
	return dst
}

// genTemplates is a pool of JSON payloads of 40 to 200 bytes: the small
// records of the round trip test are a template with the record's sequence
// number stamped into it, which is far cheaper than generating each. Like
// real dead letters, records repeat much of each other.
var genTemplates = func() [][]byte {
	t := make([][]byte, 512)
	for i := range t {
		size := 40 + int(splitmix64(uint64(i)^0xa5a5)%161)
		t[i] = appendJSONRecord(nil, uint64(i), size)
	}
	return t
}()

// smallPayload appends the payload of small record seq: 40 to 200 bytes of
// JSON, unique per seq (its first 16 hex digits after `{"id":"` are seq).
func smallPayload(dst []byte, seq uint64) []byte {
	h := splitmix64(seq)
	start := len(dst)
	dst = append(dst, genTemplates[h%uint64(len(genTemplates))]...)
	appendHex(dst[start+7:start+7], seq, 16)
	return dst
}

// isSmallPayload reports whether p is the payload of small record seq,
// without building it.
func isSmallPayload(p []byte, seq uint64) bool {
	tpl := genTemplates[splitmix64(seq)%uint64(len(genTemplates))]
	if len(p) != len(tpl) || string(p[:7]) != string(tpl[:7]) || string(p[23:]) != string(tpl[23:]) {
		return false
	}
	for i := range 16 {
		if p[7+i] != hexDigits[(seq>>(60-4*uint(i)))&15] {
			return false
		}
	}
	return true
}

// smallHeaders returns the headers of small record seq, as a map and
// encoded. There are a few hundred distinct header sets, some empty.
func smallHeaders(seq uint64) (map[string]string, []byte) {
	i := splitmix64(seq^0x5bd1e995) % uint64(len(genHeaderSets))
	return genHeaderSets[i], genHeaderEnc[i]
}

var genHeaderSets, genHeaderEnc = func() ([]map[string]string, [][]byte) {
	var sets []map[string]string
	var enc [][]byte
	for i := range 512 {
		r := newPRNG(uint64(i) + 77)
		var m map[string]string
		switch i % 16 {
		case 0: // no headers
		case 1:
			m = map[string]string{"reason": genReasons[r.intn(len(genReasons))]}
		default:
			m = map[string]string{
				"reason":   genReasons[r.intn(len(genReasons))],
				"source":   genSources[r.intn(len(genSources))],
				"attempts": genAttempts[r.intn(len(genAttempts))],
			}
			if i%4 == 3 {
				m["trace-id"] = string(appendHex(nil, r.next(), 16))
			}
			if i%8 == 5 {
				m[""] = "empty key"
				m["empty"] = ""
			}
		}
		sets = append(sets, m)
		enc = append(enc, AppendHeaders(nil, m))
	}
	return sets, enc
}()

// smallTime returns the time of small record seq: mostly increasing, with
// jitter that makes some records older than the ones before them.
func smallTime(seq uint64) time.Time {
	return genBaseTime.Add(time.Duration(seq)*997*time.Microsecond - time.Duration(splitmix64(seq^0x1234)%5_000_000))
}
