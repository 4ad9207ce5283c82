package segment

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the checked-in seed corpus of the fuzz targets")

// TestFuzzCorpus checks the seed corpus checked in under testdata/fuzz:
// well-formed files for each fuzz target, covering valid segments of every
// codec. With -update-fuzz-corpus it writes the corpus first.
func TestFuzzCorpus(t *testing.T) {
	if *updateFuzzCorpus {
		writeFuzzCorpus(t)
	}
	// FuzzReader: among the seeds, a valid sealed segment of each codec.
	codecs := map[Codec]bool{}
	files := corpusFiles(t, "FuzzReader")
	for _, path := range files {
		vals := readCorpusFile(t, path, "[]byte")
		data := vals[0].([]byte)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil || !r.Sealed() {
			continue
		}
		// A sealed segment without damage whose blocks are all stored
		// with its codec.
		n := 0
		for {
			b, err := r.NextBlock()
			if err == io.EOF {
				break
			}
			if err != nil || b.Codec != r.Header().Codec {
				n = -1
				break
			}
			n++
		}
		if n > 1 {
			codecs[r.Header().Codec] = true
		}
	}
	for _, c := range allCodecs {
		if !codecs[c] {
			t.Errorf("no valid %s segment among the %d FuzzReader seeds", c, len(files))
		}
	}
	for _, path := range corpusFiles(t, "FuzzRoundTrip") {
		readCorpusFile(t, path, "[]byte", "byte", "uint16")
	}
}

func corpusFiles(t *testing.T, target string) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("%d seed files for %s, want at least 10", len(files), target)
	}
	return files
}

// readCorpusFile parses a "go test fuzz v1" file with values of the given
// types ([]byte, byte or uint16).
func readCorpusFile(t *testing.T, path string, types ...string) []any {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != "go test fuzz v1" || len(lines) != len(types)+1 {
		t.Fatalf("%s: not a go test fuzz v1 file of %v", path, types)
	}
	var vals []any
	for i, typ := range types {
		line := lines[i+1]
		var v any
		var n int
		var err error
		switch typ {
		case "[]byte":
			var s string
			n, err = fmt.Sscanf(line, "[]byte(%q)", &s)
			v = []byte(s)
		case "byte":
			var c string
			if lit, ok := strings.CutPrefix(line, "byte("); ok && strings.HasSuffix(lit, ")") {
				c, err = strconv.Unquote(strings.TrimSuffix(lit, ")"))
			}
			if r, size := utf8.DecodeRuneInString(c); size == len(c) && size > 0 && r < 256 {
				n, v = 1, byte(r)
			}
		case "uint16":
			var u uint16
			n, err = fmt.Sscanf(line, "uint16(%d)", &u)
			v = u
		}
		if n != 1 || err != nil {
			t.Fatalf("%s line %d: %q is not a %s: %v", path, i+2, line, typ, err)
		}
		vals = append(vals, v)
	}
	return vals
}

func writeFuzzCorpus(t *testing.T) {
	write := func(target, name string, vals ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case byte:
				fmt.Fprintf(&b, "byte(%q)\n", v)
			default:
				fmt.Fprintf(&b, "%T(%v)\n", v, v)
			}
		}
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"sealed", "unsealed", "truncated-two-thirds", "truncated-trailer", "flipped"}
	seeds := readerSeeds(t)
	for i, s := range seeds[:len(allCodecs)*len(kinds)] {
		write("FuzzReader", fmt.Sprintf("%s-%s", allCodecs[i/len(kinds)], kinds[i%len(kinds)]), s)
	}
	for i, name := range []string{"empty-sealed", "header-only", "empty"} {
		write("FuzzReader", name, seeds[len(allCodecs)*len(kinds)+i])
	}
	for i, s := range roundTripSeeds() {
		write("FuzzRoundTrip", fmt.Sprintf("seed-%02d", i), s.data, s.codec, s.blockSize)
	}
}
