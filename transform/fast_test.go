package transform

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"

	"github.com/dlqdump/dlqdump"
)

// differ runs a program's fast path and gojq on the same record and fails
// when the fast path, where it does not give up, delivers anything else
// than gojq, byte for byte. It reports whether the fast path applied.
func differ(t *testing.T, j *JQ, payload []byte, headers dlqdump.Headers) bool {
	t.Helper()
	id, _ := dlqdump.ParseRecordID("019a3f2c7d1e5b8a90c4d2e1-42")
	mk := func() *dlqdump.Replay {
		return &dlqdump.Replay{ID: id, Time: time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC), Payload: bytes.Clone(payload), Headers: maps.Clone(headers)}
	}
	fast, slow := mk(), mk()
	if !j.fast.apply(fast) {
		if !bytes.Equal(fast.Payload, payload) || !maps.Equal(fast.Headers, headers) {
			t.Fatalf("%s on %q: gave up and changed the record: %q %v", j, payload, fast.Payload, fast.Headers)
		}
		return false
	}
	if err := j.slow(context.Background(), slow); err != nil {
		t.Fatalf("%s on %q %v: the fast path gave %q %v, gojq failed: %v", j, payload, headers, fast.Payload, fast.Headers, err)
	}
	got, want := fast.Payload, slow.Payload
	if j.fast.keep {
		// The same value: gojq's bytes of both are the same.
		v, ok := decodeJSON(got)
		w, _ := decodeJSON(want)
		if !ok {
			t.Fatalf("%s on %q: the fast path kept the layout and gave %q, not JSON", j, payload, got)
		}
		got, _ = gojq.Marshal(v)
		want, _ = gojq.Marshal(w)
		if j.fast.payload == nil && !bytes.Equal(fast.Payload, payload) {
			t.Fatalf("%s on %q: the payload is not changed, yet delivered as %q", j, payload, fast.Payload)
		}
	}
	if !bytes.Equal(got, want) || !maps.Equal(fast.Headers, slow.Headers) {
		t.Fatalf("%s on %q %v:\nfast %q %v\ngojq %q %v", j, payload, headers, fast.Payload, fast.Headers, slow.Payload, slow.Headers)
	}
	return true
}

// keepLayout are the Options of the fast path that keeps the layout.
var keepLayout = &Options{KeepLayout: true}

// fastPrograms are programs the fast path takes.
var fastPrograms = []string{
	`.payload.user.email |= ascii_downcase`,
	`.payload.a = "x"`,
	`.payload.a.b = 1.50`,
	`.payload.a.b.c = {"z": [1, "two", null], "a": -0}`,
	`.payload.b |= ascii_upcase | .headers.fixed = "v2"`,
	`.payload.a |= tostring`,
	`.payload.c //= "EUR"`,
	`.payload.a.b //= .payload.c`,
	`del(.payload.a, .payload.b.c)`,
	`del(.payload.a) | .headers.error = null`,
	`.payload.x = .payload.a.b`,
	`.payload.id = .id | .payload.t = .time`,
	`.payload.h = .headers.reason`,
	`.headers.n = .payload.a`,
	`.headers.reason |= ascii_upcase`,
	`.headers.reason //= "none"`,
	`del(.headers.reason)`,
	`.payload = {"replaced": true}`,
	`.payload |= ascii_downcase`,
	`.payload."x y"."é" = "\u0000\u007f<&>"`,
	`.headers.k = "v"`,
}

// seedPayloads are payloads the differential tests start from.
var seedPayloads = []string{
	`{"id":"evt_1","user":{"id":5048945,"name":"Elena Dubois","email":"e.Dubois15@shop.example.org"},"amount":{"value":8813.28,"currency":"EUR"},"items":[]}`,
	`{"a":{"b":"X"},"b":{"c":1,"d":2},"c":null}`,
	`{"b":"Mixed Case","a":12345678901234567890,"c":false}`,
	` { "a" : { "b" : null } , "a" : "dup" } `,
	`{"a":"\u0041\n\"q\"","b":"\u00e9\ud83d\ude00","c":"\ud800"}`,
	`{"a":[1,{"b":2},"x",true,false,null,-0.5e-3,1E+2]}`,
	`{}`, `null`, `[]`, `"Just A String"`, `12.50`, `not json`, "\xff\xfe", `{"a":1}{"b":2}`, `{"a":01}`,
	`{"z":1,"y":2,"x":{"b":1,"a":2,"a":3}}`, "{\"a\":\"\x7f\"}", `{"a\"b":1,"a":2}`, `{"reason":"x","a":{"b":{}}}`,
	`{"a":tru}`, `{"a":-}`, `nul`, `{"a":1.}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":1`,
	`{"a":"line\u2028sep"}`, `{"a" :"s" }  `, "\t{\"a\":true}\n", `{"a":"tab	in"}`, `{"a":"\/"}`,
}

func TestFastPathIsGojq(t *testing.T) {
	for _, o := range []*Options{nil, keepLayout} {
		t.Run(fmt.Sprintf("KeepLayout=%v", o != nil), func(t *testing.T) { fastPathIsGojq(t, o) })
	}
}

func fastPathIsGojq(t *testing.T, o *Options) {
	took := map[string]bool{}
	for _, prog := range fastPrograms {
		j, err := CompileJQ(prog, o)
		if err != nil {
			t.Fatal(err)
		}
		if j.fast == nil {
			t.Fatalf("%s: not taken by the fast path", prog)
		}
		for _, p := range seedPayloads {
			for _, h := range []dlqdump.Headers{{}, {"reason": "Failed", "error": "boom"}, {"reason": "\xff"}} {
				if differ(t, j, []byte(p), h) {
					took[prog] = true
				}
			}
		}
	}
	for _, prog := range fastPrograms {
		if !took[prog] {
			t.Errorf("%s: the fast path gave up on every record", prog)
		}
	}
}

// Programs the fast path does not take run on gojq only.
func TestFastPathRefuses(t *testing.T) {
	for _, prog := range []string{
		`.`, `.payload.a = 1 | .payload.a.b = 2`, `.payload.a = .payload.b | .payload.b = 1`, `.payload.a = .payload.a`,
		`.payload.a[0] = 1`, `.payload.a? = 1`, `.payload[] = 1`, `.payload.a = "\(.id)"`, `.payload.a |= . + 1`,
		`del(.payload)`, `.headers = {}`, `.headers.a.b = "x"`, `.headers.n = 1`, `.id = "x"`, `.payload.a = (1, 2)`,
		`.payload.a = now`, `def f: .; .payload.a = 1`, `.payload.a |= ascii_downcase | .payload.a |= ascii_upcase`,
		`.payload.a = {b: .payload.c}`, `.payload.a = [.payload.c]`, `.payload.a |= ltrimstr("x")`,
	} {
		j, err := CompileJQ(prog, nil)
		if err != nil {
			t.Fatal(prog, err)
		}
		if j.fast != nil {
			t.Errorf("%s: taken by the fast path", prog)
		}
	}
}

// TestFastPathRandom runs random fast programs on random payloads (keys
// duplicated, escaped, spaced; values of every type) on both paths.
func TestFastPathRandom(t *testing.T) {
	for _, o := range []*Options{nil, keepLayout} {
		t.Run(fmt.Sprintf("KeepLayout=%v", o != nil), func(t *testing.T) { fastPathRandom(t, o) })
	}
}

func fastPathRandom(t *testing.T, o *Options) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	var took int
	for range n {
		prog := randomProgram(rng)
		j, err := CompileJQ(prog, o)
		if err != nil {
			t.Fatal(prog, err)
		}
		if j.fast == nil {
			continue
		}
		h := dlqdump.Headers{}
		if rng.IntN(2) == 0 {
			h["reason"] = "Failed A"
		}
		if differ(t, j, randomJSON(rng, 0, true), h) {
			took++
		}
	}
	if took < n/4 {
		t.Fatalf("the fast path applied to %d of %d records", took, n)
	}
}

// FuzzFastPath: on any payload and headers, a program the fast path takes
// delivers what gojq delivers, or the fast path gives up.
func FuzzFastPath(f *testing.F) {
	for k, p := range seedPayloads {
		f.Add(uint8(k), []byte(p), "Failed")
	}
	var progs []*JQ // each program, writing gojq's bytes and keeping the layout
	for _, prog := range fastPrograms {
		for _, o := range []*Options{nil, keepLayout} {
			j, err := CompileJQ(prog, o)
			if err != nil {
				f.Fatal(err)
			}
			progs = append(progs, j)
		}
	}
	f.Fuzz(func(t *testing.T, prog uint8, payload []byte, reason string) {
		differ(t, progs[int(prog)%len(progs)], payload, dlqdump.Headers{"reason": reason})
	})
}

var randomKeys = []string{"a", "b", "c", "x y", "é", `a\"b`, "B", "reason"}

func randomPath(rng *rand.Rand) string {
	if rng.IntN(5) == 0 {
		return ".headers." + []string{"reason", "k", `"x y"`}[rng.IntN(3)]
	}
	var b strings.Builder
	b.WriteString(".payload")
	for range rng.IntN(3) + 1 {
		k := randomKeys[rng.IntN(len(randomKeys))]
		if k == "a" || k == "b" || k == "c" || k == "B" || k == "reason" {
			b.WriteString("." + k)
		} else {
			fmt.Fprintf(&b, `."%s"`, k)
		}
	}
	return b.String()
}

func randomProgram(rng *rand.Rand) string {
	var stages []string
	for range rng.IntN(3) + 1 {
		p := randomPath(rng)
		switch rng.IntN(6) {
		case 0:
			stages = append(stages, p+" = "+[]string{`"x"`, `1.50`, `null`, `false`, `{"b":[1,"Y"]}`, `-3`, `"A\nB"`}[rng.IntN(7)])
		case 1:
			stages = append(stages, p+" |= "+[]string{"ascii_downcase", "ascii_upcase", "tostring"}[rng.IntN(3)])
		case 2:
			stages = append(stages, p+" //= "+[]string{`"d"`, `0`, randomPath(rng)}[rng.IntN(3)])
		case 3:
			stages = append(stages, "del("+p+", "+randomPath(rng)+")")
		case 4:
			stages = append(stages, p+" = "+[]string{randomPath(rng), ".id", ".time"}[rng.IntN(3)])
		default:
			stages = append(stages, "del("+p+")")
		}
	}
	return strings.Join(stages, " | ")
}

func randomJSON(rng *rand.Rand, depth int, top bool) []byte {
	ws := func() string { return []string{"", "", "", " ", "\n\t"}[rng.IntN(5)] }
	k := rng.IntN(10)
	if top {
		k = rng.IntN(3) + 7
	}
	if depth > 3 && k >= 7 {
		k = rng.IntN(7)
	}
	switch k {
	case 0:
		return []byte("null")
	case 1:
		return []byte([]string{"true", "false"}[rng.IntN(2)])
	case 2:
		return []byte([]string{"0", "-0", "12.50", "1e3", "-2E-7", "12345678901234567890"}[rng.IntN(6)])
	case 3, 4:
		return []byte([]string{`"Mixed Case"`, `""`, `"\u0041b"`, `"é ü"`, `"q\"t"`, `"a\u0000"`, "\"\x7f\"", `"\ud800"`}[rng.IntN(8)])
	case 5, 6:
		var b bytes.Buffer
		b.WriteString("[" + ws())
		for i := range rng.IntN(3) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.Write(randomJSON(rng, depth+1, false))
		}
		b.WriteString(ws() + "]")
		return b.Bytes()
	}
	var b bytes.Buffer
	b.WriteString("{" + ws())
	for i := range rng.IntN(5) {
		if i > 0 {
			b.WriteString("," + ws())
		}
		fmt.Fprintf(&b, `"%s"%s:%s`, randomKeys[rng.IntN(len(randomKeys))], ws(), ws())
		b.Write(randomJSON(rng, depth+1, false))
	}
	b.WriteString(ws() + "}")
	return b.Bytes()
}

// special says of eight bytes what strClass says of each.
func TestSpecial(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 1_000_000 {
		var b [8]byte
		for k := range b {
			b[k] = byte(0x20 + rng.IntN(0x5f)) // printable ASCII
			if n%2 == 0 && rng.IntN(8) == 0 {
				b[k] = byte(rng.IntN(256))
			}
		}
		want, first := false, 8
		for k, c := range b {
			if strClass[c] != 0 && !want {
				first = k
			}
			want = want || strClass[c] != 0
		}
		x := binary.LittleEndian.Uint64(b[:])
		if special(x) != want {
			t.Fatalf("special(%q) = %v", b, !want)
		}
		// The lowest bit specials sets is the first special byte's.
		if got := bits.TrailingZeros64(specials(x)) >> 3; got != first {
			t.Fatalf("specials(%q): the first special byte at %d, want %d", b, got, first)
		}
	}
}
