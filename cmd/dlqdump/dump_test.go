package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/apipb"
	"google.golang.org/protobuf/types/known/typepb"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// rec is a record of a test segment.
type rec struct {
	at      time.Time
	headers map[string]string
	payload []byte
}

// segSpec describes a test segment. Everything that ends up in its name and
// in the output is fixed.
type segSpec struct {
	area      sink.Area
	created   time.Time
	id        byte // the last byte of the ID: the name ends in -00000000000000ID.dlq
	version   dlqdump.Version
	codec     segment.Codec
	blockSize int
	reason    string // quarantine reason
	records   []rec
}

func (s *segSpec) header() segment.Header {
	var id segment.ID
	id[15] = s.id
	return segment.Header{Codec: s.codec, DataVersion: uint64(s.version), Created: s.created, ID: id}
}

func (s *segSpec) name() string {
	h := s.header()
	return segment.FileName(h.Created, h.ID)
}

// writeSegment publishes the segment in the dump directory dir through
// fs.Reader, as a restorer would, and returns its path.
func writeSegment(t *testing.T, dir string, s segSpec) string {
	t.Helper()
	writeSegmentTo(t, &fs.Reader{Directory: dir}, s)
	return segPath(dir, s.area, s.name())
}

// writeSegmentTo publishes the segment through a sink.Reader (a directory or
// an S3 prefix), with its quarantine reason.
func writeSegmentTo(t *testing.T, rd sink.Reader, s segSpec) {
	t.Helper()
	ctx := context.Background()
	sw, err := rd.Create(ctx, s.area, s.name())
	if err != nil {
		t.Fatal(err)
	}
	w, err := segment.NewWriter(sw, s.header(), &segment.WriterOptions{BlockSize: s.blockSize})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.records {
		if err := w.Add(r.at, r.headers, r.payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if s.reason != "" {
		if err := rd.Move(ctx, s.name(), s.area, s.area, s.reason); err != nil {
			t.Fatal(err)
		}
	}
}

// segPath returns the path of a segment in a dump directory.
func segPath(dir string, area sink.Area, name string) string {
	switch area {
	case sink.AreaQuarantine:
		return filepath.Join(dir, fs.QuarantineDir, name)
	case sink.AreaArchive:
		return filepath.Join(dir, fs.ArchiveDir, name)
	}
	return filepath.Join(dir, name)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The sample dump: three ready segments (one of data Version 2, one with
// S2 blocks), a quarantined one and an archived one.
var (
	segA = segSpec{area: sink.AreaReady, created: t0, id: 0xa1, version: dlqdump.NewVersion(1, 0, 0, 0), codec: segment.CodecZstd, blockSize: 300}
	segB = segSpec{area: sink.AreaReady, created: t0.Add(time.Hour), id: 0xb2, version: dlqdump.NewVersion(1, 0, 0, 0), codec: segment.CodecZstd}
	segC = segSpec{area: sink.AreaReady, created: t0.Add(20*time.Hour + 30*time.Minute), id: 0xc3, version: dlqdump.NewVersion(2, 0, 0, 0), codec: segment.CodecS2}
	segD = segSpec{area: sink.AreaQuarantine, created: t0.Add(-27 * time.Hour), id: 0xd4, version: dlqdump.NewVersion(0, 9, 0, 0), codec: segment.CodecZstd,
		reason: "version 0.9.0.0, restorer expects 1.0.0.0"}
	segE = segSpec{area: sink.AreaArchive, created: t0.Add(-51 * time.Hour), id: 0xe5, version: dlqdump.NewVersion(1, 0, 0, 0), codec: segment.CodecZstd}
)

func init() {
	for i := range 12 {
		h := map[string]string{"reason": "failed", "source": "orders", "attempts": "3"}
		if i%3 == 2 {
			h = map[string]string{"reason": "leak", "source": "orders"}
		}
		segA.records = append(segA.records, rec{
			at:      t0.Add(time.Duration(i)*10*time.Second + 250*time.Millisecond),
			headers: h,
			payload: []byte(`{"order":` + itoa(1001+i) + `,"sku":"SKU-` + itoa(7*i%13) + `","qty":` + itoa(1+i%4) + `,"note":"customer asked for gift wrapping"}`),
		})
	}
	tb := segB.created.Add(5 * time.Second)
	segB.records = []rec{
		{tb, map[string]string{"reason": "deadline", "source": "billing"}, []byte(`{"invoice":"INV-42","amount_cents":1999}`)},
		{tb.Add(time.Second), map[string]string{"reason": "failed", "error": "upstream: 503 Service Unavailable", "note": "ünïcode ✓"}, []byte("café ✓ — UTF-8 text")},
		{tb.Add(2 * time.Second), nil, []byte{0x00, 0x01, 0xfe, 0xff, 0x10, 0x80}},
		{tb.Add(3 * time.Second), map[string]string{"reason": "deadline"}, []byte{}},
		{tb.Add(4*time.Second + 1), nil, []byte("line one\nline two\ttabbed")},
	}
	tc := segC.created.Add(time.Minute)
	for i := range 3 {
		segC.records = append(segC.records, rec{tc.Add(time.Duration(i) * time.Minute), map[string]string{"reason": "leak", "source": "orders"},
			[]byte(`{"order":` + itoa(2001+i) + `,"v":2}`)})
	}
	td := segD.created.Add(time.Second)
	segD.records = []rec{
		{td, map[string]string{"reason": "failed", "source": "legacy"}, []byte(`{"legacy":1}`)},
		{td.Add(time.Second), map[string]string{"reason": "failed", "source": "legacy"}, []byte(`{"legacy":2}`)},
	}
	te := segE.created.Add(time.Second)
	segE.records = []rec{
		{te, map[string]string{"reason": "leak", "source": "orders"}, []byte(`{"order":1}`)},
		{te.Add(time.Second), map[string]string{"reason": "leak", "source": "orders"}, []byte(`{"order":2}`)},
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

var sampleSegs = []*segSpec{&segA, &segB, &segC, &segD, &segE}

// sampleRecords counts the ready records of the sample dump.
const sampleReady = 12 + 5 + 3

// makeSample writes the sample dump into a new directory and returns it.
func makeSample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, s := range sampleSegs {
		writeSegment(t, dir, *s)
	}
	return dir
}

// protoSample writes a dump of apipb.Method payloads (and one that is not
// a protobuf message), and a FileDescriptorSet for it, as protoc
// --include_imports --descriptor_set_out would; it returns the dump and the
// descriptor file.
func protoSample(t *testing.T) (dir, desc string) {
	t.Helper()
	dir = t.TempDir()
	s := segSpec{area: sink.AreaReady, created: t0.Add(48 * time.Hour), id: 0x9b, version: dlqdump.NewVersion(1, 0, 0, 0), codec: segment.CodecZstd}
	msgs := []*apipb.Method{
		{Name: "CreateOrder", RequestTypeUrl: "type.googleapis.com/shop.v1.CreateOrderRequest", ResponseTypeUrl: "type.googleapis.com/shop.v1.Order"},
		{Name: "WatchOrders", RequestStreaming: true, ResponseStreaming: true, Options: []*typepb.Option{{Name: "deadline"}}},
	}
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		s.records = append(s.records, rec{s.created.Add(time.Duration(i) * time.Second), map[string]string{"reason": "failed"}, b})
	}
	s.records = append(s.records, rec{s.created.Add(5 * time.Second), map[string]string{"reason": "failed"}, []byte{0xff, 0xff, 0xff}})
	writeSegment(t, dir, s)

	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(apipb.File_google_protobuf_api_proto)
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	desc = filepath.Join(t.TempDir(), "api.pb")
	if err := os.WriteFile(desc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, desc
}
