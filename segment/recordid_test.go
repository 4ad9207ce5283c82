package segment

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRecordIDString(t *testing.T) {
	h := testHeader(CodecZstd)
	id := RecordID{Origin: h.Origin(), Seq: 42}
	s := id.String()
	if want := h.ID.String()[8:] + "-42"; s != want {
		t.Fatalf("String() = %q, want %q (ID bytes 4-15, then the sequence number)", s, want)
	}
	got, err := ParseRecordID(strings.ToUpper(s))
	if err != nil || got != id {
		t.Fatalf("ParseRecordID(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "42", "00-1", h.ID.String() + "-1", s[:24] + "-", s[:24] + "-x", s[:24] + "-01", s[:24] + "-+1",
		"zz" + s[2:], strings.Repeat("0", 24) + "-1", s[:24] + "-18446744073709551616"} {
		if _, err := ParseRecordID(bad); !errors.Is(err, ErrRecordID) {
			t.Errorf("ParseRecordID(%q): %v, want ErrRecordID", bad, err)
		}
	}
}

// TestCopyKeepID copies records into another segment, at other sequence
// numbers and twice over: each keeps the ID it had in the first segment.
func TestCopyKeepID(t *testing.T) {
	recs := summaryRecs(30)
	data := writeRecords(t, CodecZstd, nil, recs)
	r := open(t, data, nil)
	h := r.Header()
	var ids []RecordID
	var out bytes.Buffer
	h2 := testHeader(CodecS2)
	h2.ID[10] ^= 0xff // another segment
	w, err := NewWriter(&out, h2, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every other record, after one of its own: other sequence numbers.
	if err := w.Add(h.Created, nil, []byte("not a copy")); err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Seq%2 == 1 {
			continue
		}
		ids = append(ids, h.RecordID(&rec))
		if err := w.CopyKeepID(&h, &rec, map[string]string{"quarantine": "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(data []byte) {
		t.Helper()
		r := open(t, data, nil)
		hc := r.Header()
		first, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got := hc.RecordID(&first); got != (RecordID{Origin: hc.Origin(), Seq: 0}) || got.Origin == h.Origin() {
			t.Fatalf("the copy's own record has ID %s", got)
		}
		for i, want := range ids {
			rec, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if got := hc.RecordID(&rec); got != want {
				t.Fatalf("copied record %d (seq %d) has ID %s, want %s", i, rec.Seq, got, want)
			}
			if v, _ := rec.Headers.Get("quarantine"); v != "test" {
				t.Fatalf("copied record %d lost its extra header: %v", i, rec.Headers.Map())
			}
		}
	}
	check(out.Bytes())
	// Copied again, elsewhere: the IDs stay.
	r2 := open(t, out.Bytes(), nil)
	var again bytes.Buffer
	w2, _ := NewWriter(&again, testHeader(CodecNone), nil)
	hr2 := r2.Header()
	for {
		rec, err := r2.Next()
		if err == io.EOF {
			break
		}
		if err := w2.CopyKeepID(&hr2, &rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	r3 := open(t, again.Bytes(), nil)
	h3 := r3.Header()
	rec, _ := r3.Next()
	if got := h3.RecordID(&rec); got != (RecordID{Origin: h2.Origin(), Seq: 0}) {
		t.Fatalf("the first copy's own record, copied again, has ID %s, want %s-0", got, h2.Origin())
	}
	for _, want := range ids {
		rec, _ := r3.Next()
		if got := h3.RecordID(&rec); got != want {
			t.Fatalf("copied twice: ID %s, want %s", got, want)
		}
	}
}
