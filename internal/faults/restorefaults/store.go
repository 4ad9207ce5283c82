package restorefaults

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Store makes the places runs restore from: a new, empty one per run.
type Store interface {
	// Name names the store in reports: "fs", "gofakes3", "versitygw".
	Name() string
	// New returns a new empty place.
	New() (*Place, error)
}

// Place is the store of one run.
type Place struct {
	// Reader is the place's sink.
	Reader sink.Reader
	// Dir is the place's directory, for a directory ("" on S3): its
	// temporary files are checked too.
	Dir string
	// spec is how a child process opens the place (OpenPlace).
	spec placeSpec
}

// placeSpec describes a place to a child process.
type placeSpec struct {
	Dir    string          `json:"dir,omitempty"`
	S3     *s3test.Server  `json:"s3,omitempty"`
	Prefix string          `json:"prefix,omitempty"`
	Keys   json.RawMessage `json:"-"`
}

// open opens the place the spec describes.
func (p placeSpec) open() (*Place, error) {
	if p.S3 == nil {
		return &Place{Reader: &fs.Reader{Directory: p.Dir}, Dir: p.Dir, spec: p}, nil
	}
	return &Place{Reader: &s3.Reader{Client: p.S3.Client(), Bucket: p.S3.Bucket, Prefix: p.Prefix, Retry: s3Retry}, spec: p}, nil
}

// s3Retry is the S3 Reader's retry policy in runs: one attempt per call, so
// that a fault point is one call.
var s3Retry = s3.Retry{MaxAttempts: 1}

// DirStore returns a Store of directories made by tempDir.
func DirStore(tempDir func() (string, error)) Store { return dirStore(tempDir) }

type dirStore func() (string, error)

func (dirStore) Name() string { return "fs" }

func (d dirStore) New() (*Place, error) {
	dir, err := d()
	if err != nil {
		return nil, err
	}
	return placeSpec{Dir: dir}.open()
}

// S3Store returns a Store of prefixes of srv's bucket.
func S3Store(srv *s3test.Server) Store { return &s3Store{srv: srv} }

type s3Store struct {
	srv *s3test.Server
	n   atomic.Int64
}

func (s *s3Store) Name() string { return s.srv.Name }

func (s *s3Store) New() (*Place, error) {
	prefix := fmt.Sprintf("%srun-%d/", s3test.UniquePrefix("restorefaults"), s.n.Add(1))
	return placeSpec{S3: s.srv, Prefix: prefix}.open()
}

// segmentNames returns the names of an area's segments.
func (p *Place) segmentNames(area sink.Area) ([]string, error) {
	var out []string
	for si, err := range p.Reader.List(ctxBackground(), area) {
		if err != nil {
			return nil, err
		}
		out = append(out, si.Name)
	}
	return out, nil
}

// read opens a segment of the place for reading with keys.
func (p *Place) read(area sink.Area, name string, keys segment.KeyUnwrapper) (*segment.Reader, func(), error) {
	f, err := p.Reader.Open(ctxBackground(), area, name)
	if err != nil {
		return nil, nil, err
	}
	r, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name, Keys: keys})
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return r, func() { _ = f.Close() }, nil
}

// payloads returns the payloads of every segment of an area.
func (p *Place) payloads(area sink.Area, keys segment.KeyUnwrapper) ([]string, error) {
	names, err := p.segmentNames(area)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		r, done, err := p.read(area, n, keys)
		if err != nil {
			return nil, err
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				done()
				return nil, err
			}
			out = append(out, string(rec.Payload))
		}
		done()
	}
	return out, nil
}

// largestBlock returns the largest number of records in a block of an
// area's segments.
func (p *Place) largestBlock(area sink.Area, keys segment.KeyUnwrapper) (int, error) {
	names, err := p.segmentNames(area)
	if err != nil {
		return 0, err
	}
	m := 0
	for _, n := range names {
		r, done, err := p.read(area, n, keys)
		if err != nil {
			return 0, err
		}
		if ft := r.Footer(); ft != nil {
			for _, b := range ft.Blocks {
				m = max(m, int(b.Count))
			}
		}
		done()
	}
	return m, nil
}

// leftovers lists what must not be left after a run: ready and staged
// segments, claim records (but those kept by quarantined segments) and, in
// a directory and with temp, temporary files (a paused writer's stay until
// it goes on).
func (p *Place) leftovers(temp bool) ([]string, error) {
	var left []string
	for _, area := range []sink.Area{sink.AreaReady, sink.AreaStaging} {
		names, err := p.segmentNames(area)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			left = append(left, area.String()+"/"+n)
		}
	}
	quarantined, err := p.segmentNames(sink.AreaQuarantine)
	if err != nil {
		return nil, err
	}
	for n, err := range p.Reader.RecordNames(ctxBackground()) {
		if err != nil {
			return nil, err
		}
		if !slices.Contains(quarantined, n) { // a quarantined segment may keep its record
			left = append(left, "record "+n)
		}
	}
	if p.Dir != "" && temp {
		for _, pat := range []string{".*.part", ".*.open", fs.QuarantineDir + "/.*.part", fs.ArchiveDir + "/.*.part", fs.StagingDir + "/.*"} {
			m, err := filepath.Glob(filepath.Join(p.Dir, pat))
			if err != nil {
				return nil, err
			}
			for _, path := range m {
				left = append(left, strings.TrimPrefix(path, p.Dir+"/"))
			}
		}
	}
	return left, nil
}

// OpenPlace opens the place a child process was given.
func openPlace(spec placeSpec) (*Place, error) {
	if spec.Dir == "" && spec.S3 == nil {
		return nil, errors.New("restorefaults: the child was given no store")
	}
	if spec.Dir != "" {
		if _, err := os.Stat(spec.Dir); err != nil {
			return nil, err
		}
	}
	return spec.open()
}
