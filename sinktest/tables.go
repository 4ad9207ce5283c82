package sinktest

import (
	"errors"
	"fmt"

	"github.com/dlqdump/dlqdump/sink"
)

// The tables of records (sink.Tables), which restore jobs are kept in.

// table returns the Reader's table name, failing unless it keeps tables.
func (s *suite) table(name string) sink.Records {
	s.Helper()
	tb, ok := s.s.Reader.(sink.Tables)
	if !ok {
		s.Fatalf("%T does not implement sink.Tables", s.s.Reader)
	}
	t, err := tb.Table(name)
	if err != nil {
		s.Fatalf("Table(%q): %v", name, err)
	}
	return t
}

// A table is a store of records of its own: compare-and-swap on its keys,
// sorted listing that may stop early, apart from the segments' records and
// from other tables; bad names and keys are refused.
func testTables(s *suite) {
	jobs, other := s.table("jobs"), s.table("other")
	keys := []string{"d-20261127T030000Z-b", "d-20261127T030000Z-a", "j-a", "j-b", "r-host_1"}
	for i, k := range keys {
		v, err := jobs.WriteRecord(s.ctx, k, []byte(fmt.Sprintf(`{"n":%d}`, i)), "")
		s.noErr("WriteRecord("+k+")", err)
		if v == "" {
			s.Fatalf("WriteRecord(%s) returned an empty version", k)
		}
		_, err = jobs.WriteRecord(s.ctx, k, []byte(`{"again":true}`), "")
		s.wantErr("WriteRecord("+k+") where one is", err, sink.ErrConflict)
	}
	var got []string
	for k, err := range jobs.RecordNames(s.ctx) {
		s.noErr("RecordNames", err)
		got = append(got, k)
	}
	want := []string{"d-20261127T030000Z-a", "d-20261127T030000Z-b", "j-a", "j-b", "r-host_1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		s.Fatalf("RecordNames = %q, want %q", got, want)
	}
	n := 0
	for _, err := range jobs.RecordNames(s.ctx) {
		s.noErr("RecordNames", err)
		n++
		if n == 2 {
			break // a listing may stop early
		}
	}
	for range other.RecordNames(s.ctx) {
		s.Fatal("another table lists the records of table jobs")
	}
	for n, err := range s.s.Reader.RecordNames(s.ctx) {
		s.noErr("Reader.RecordNames", err)
		s.Fatalf("the segments' records list %q, a table's", n)
	}
	data, v, err := jobs.ReadRecord(s.ctx, "j-a")
	s.noErr("ReadRecord(j-a)", err)
	if string(data) != `{"n":2}` {
		s.Fatalf("ReadRecord(j-a) = %s", data)
	}
	v2, err := jobs.WriteRecord(s.ctx, "j-a", []byte(`{"n":20}`), v)
	s.noErr("WriteRecord(j-a) on its version", err)
	_, err = jobs.WriteRecord(s.ctx, "j-a", []byte(`{"n":21}`), v)
	s.wantErr("WriteRecord(j-a) on an old version", err, sink.ErrConflict)
	s.noErr("DeleteRecord(j-a)", jobs.DeleteRecord(s.ctx, "j-a", v2))
	_, _, err = jobs.ReadRecord(s.ctx, "j-a")
	s.wantErr("ReadRecord of a deleted record", err, sink.ErrNotFound)
	for _, bad := range []string{"", ".hidden", "a/b", "a b", string(make([]byte, sink.MaxKeyLen+1))} {
		if _, err := jobs.WriteRecord(s.ctx, bad, []byte(`{}`), ""); err == nil {
			s.Fatalf("WriteRecord(%q) accepted a bad key", bad)
		}
	}
	tb := s.s.Reader.(sink.Tables)
	if _, err := tb.Table("Bad/Name"); !errors.Is(err, sink.ErrConfig) {
		s.Fatalf("Table(bad name) = %v, want ErrConfig", err)
	}
}
