package dlqdump_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README's Go snippets are tested code. Each ```go block in README.md
// follows a marker naming the test function that holds the same code:
//
//	<!-- snippet: DIR FUNC -->
//
// DIR is the package directory ("." for this one, "s3", ...), FUNC an
// Example with an "// Output:" comment (go test runs it and checks what it
// prints) or a Test in DIR's _test.go files. In FUNC's body the code lies
// between the comment lines "// README:begin" and "// README:end"; it may be
// indented (in a function literal, say, so that its defers run before the
// Example checks what was stored). The block and the region must be the same
// code once formatted by gofmt, comments included; the block may start with
// an import declaration, whose imports FUNC's file must have too. See the
// README's Tests section.
//
// A block of declarations (types, methods) that such functions use is marked
// with a label instead of a function, <!-- snippet: DIR LABEL -->, and lies
// in a _test.go file of DIR between the top-level comment lines
// "// README:begin LABEL" and "// README:end LABEL".

const (
	readmeBegin = "// README:begin"
	readmeEnd   = "// README:end"
)

var (
	snippetMarker = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+)\s+(\w+)\s*-->$`)
	programMarker = regexp.MustCompile(`^<!--\s*program:\s*(\w+)\s*-->$`)
)

// readmePrograms are the whole programs the Markdown files may hold, marked
// <!-- program: NAME --> before their go block, each with the test that
// builds and runs it as a reader would (from the file, not from a copy).
var readmePrograms = map[string]string{
	"quickstart": "TestReadmeQuickstart",
}

// snippetFiles are the Markdown files whose go blocks are tested code: the
// README and every page of docs/.
func snippetFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
}

// readmeBlock is a ```go block of the README or a docs/ page.
type readmeBlock struct {
	file     string // the Markdown file
	line     int    // of the opening fence
	heading  string // the section it is in
	code     string
	dir, fun string // from the snippet marker before it; empty when there is none
	program  string // from the program marker before it; empty when there is none
}

// readmeBlocks returns the Go blocks of a Markdown text, file's contents.
func readmeBlocks(file, text string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	lines := strings.Split(text, "\n")
	heading, marker, markerLine := "", "", 0
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t\r")
		switch {
		case strings.HasPrefix(l, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
		case snippetMarker.MatchString(l) || programMarker.MatchString(l):
			marker, markerLine = l, i+1
		case strings.HasPrefix(l, "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(l, "```"))
			start := i
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: code block never closed", file, start+1)
			}
			if lang != "go" {
				if marker != "" {
					return nil, fmt.Errorf("%s:%d: the snippet marker %q is followed by a %q block, not a go block", file, markerLine, marker, lang)
				}
				continue
			}
			b := readmeBlock{file: file, line: start + 1, heading: heading, code: strings.Join(code, "\n")}
			if m := snippetMarker.FindStringSubmatch(marker); m != nil {
				b.dir, b.fun = m[1], m[2]
			}
			if m := programMarker.FindStringSubmatch(marker); m != nil {
				b.program = m[1]
			}
			blocks = append(blocks, b)
			marker = ""
		case l != "" && marker != "":
			return nil, fmt.Errorf("%s:%d: the snippet marker of line %d must be followed by a go block, found %q", file, i+1, markerLine, l)
		}
	}
	return blocks, nil
}

// TestReadmeSnippets checks that every Go block in README.md and in the
// pages of docs/ is the code of a test that runs (see the comment above), or
// a whole program a test builds and runs (readmePrograms).
func TestReadmeSnippets(t *testing.T) {
	var blocks []readmeBlock
	perFile := map[string]int{}
	for _, file := range snippetFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := readmeBlocks(file, string(text))
		if err != nil {
			t.Fatal(err)
		}
		perFile[file] = len(bs)
		blocks = append(blocks, bs...)
	}
	if perFile["README.md"] == 0 || len(blocks) < 10 {
		t.Fatalf("go blocks per file: %v: is the parser broken?", perFile)
	}
	used := map[string]string{}
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d (section %q, starting %q)", b.file, b.line, b.heading, firstLine(b.code))
		if b.program != "" {
			test, ok := readmePrograms[b.program]
			switch {
			case !ok:
				t.Errorf("%s: no test runs the program %q: add it to readmePrograms with the test that builds and runs it", where, b.program)
			case used["program "+b.program] != "":
				t.Errorf("%s: a second program %q (the first: %s)", where, b.program, used["program "+b.program])
			case !testDefined(t, test):
				t.Errorf("%s: the program %q: no func %s in ./*_test.go", where, b.program, test)
			default:
				used["program "+b.program] = where
				t.Logf("%s: the program %q, built and run by %s", where, b.program, test)
			}
			continue
		}
		if b.fun == "" {
			t.Errorf("%s: this Go snippet is not tested. Put the same code in an Example (with an // Output: comment) or a Test, "+
				"between the lines %q and %q, and put <!-- snippet: DIR FUNC --> on the line before the block: see the README's Tests section", where, readmeBegin, readmeEnd)
			continue
		}
		key := b.dir + " " + b.fun
		if prev, dup := used[key]; dup {
			t.Errorf("%s: %s holds the code of another block already (%s): one block per function", where, key, prev)
			continue
		}
		used[key] = where
		if err := checkSnippet(b); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
	for name := range readmePrograms {
		if used["program "+name] == "" {
			t.Errorf("no <!-- program: %s --> block in README.md or docs/: its test has nothing to run", name)
		}
	}
	if !t.Failed() {
		t.Logf("%d Go blocks (per file: %v), each the code of a test", len(blocks), perFile)
	}
}

// testDefined reports whether this package's tests define func name.
func testDefined(t *testing.T, name string) bool {
	files, _ := filepath.Glob("*_test.go")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "\nfunc "+name+"(t *testing.T) {") {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// checkSnippet finds the block's function and compares its region with the
// block.
func checkSnippet(b readmeBlock) error {
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(filepath.FromSlash(b.dir), "*_test.go"))
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != b.fun || fd.Body == nil {
				continue
			}
			if err := runsAsTest(fd, f); err != nil {
				return fmt.Errorf("%s in %s: %w", b.fun, name, err)
			}
			region, err := funcRegion(fset, src, fd, f)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", b.fun, name, err)
			}
			return compareSnippet(b.code, region, f, name)
		}
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return err
		}
		region, found, err := declRegion(fset, src, f, b.fun)
		if err != nil {
			return fmt.Errorf("%s in %s: %w", b.fun, name, err)
		}
		if found {
			return compareDecls(b.code, region)
		}
	}
	return fmt.Errorf("no function %s, nor top-level lines %q and %q, in %s/*_test.go", b.fun, readmeBegin+" "+b.fun, readmeEnd+" "+b.fun, b.dir)
}

// declRegion returns the source between the top-level comment lines
// "// README:begin label" and "// README:end label" of f, if it has them.
func declRegion(fset *token.FileSet, src []byte, f *ast.File, label string) (string, bool, error) {
	inFunc := func(c *ast.Comment) bool {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && c.Pos() > fd.Body.Lbrace && c.End() < fd.Body.Rbrace {
				return true
			}
		}
		return false
	}
	var begin, end *ast.Comment
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			switch strings.TrimSpace(c.Text) {
			case readmeBegin + " " + label:
				if begin != nil {
					return "", false, fmt.Errorf("two %q lines", c.Text)
				}
				begin = c
			case readmeEnd + " " + label:
				if end != nil {
					return "", false, fmt.Errorf("two %q lines", c.Text)
				}
				end = c
			}
		}
	}
	switch {
	case begin == nil && end == nil:
		return "", false, nil
	case begin == nil || end == nil || end.Pos() < begin.End():
		return "", false, fmt.Errorf("no %q line followed by a %q line", readmeBegin+" "+label, readmeEnd+" "+label)
	case inFunc(begin) || inFunc(end):
		return "", false, fmt.Errorf("the %q lines must be outside any function", readmeBegin+" "+label)
	}
	region := string(src[fset.Position(begin.End()).Offset:fset.Position(end.Pos()).Offset])
	return strings.TrimSpace(region), true, nil
}

// compareDecls compares a README block of declarations with the test
// file's region, both formatted by gofmt.
func compareDecls(block, region string) error {
	want, err := formatDecls(region)
	if err != nil {
		return fmt.Errorf("the test's declarations do not format: %w", err)
	}
	got, err := formatDecls(block)
	if err != nil {
		return fmt.Errorf("the block is not Go declarations gofmt can format: %w", err)
	}
	if got != want {
		return fmt.Errorf("the block differs from the test's declarations (after gofmt)%s", lineDiff(got, want))
	}
	return nil
}

// formatDecls returns top-level declarations formatted by gofmt.
func formatDecls(code string) (string, error) {
	const pkg = "package p\n\n"
	out, err := format.Source([]byte(pkg + code + "\n"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.TrimPrefix(string(out), pkg)), nil
}

// runsAsTest checks that go test runs fd and fails when it goes wrong: a
// Test, or an Example whose output is checked.
func runsAsTest(fd *ast.FuncDecl, f *ast.File) error {
	name := fd.Name.Name
	switch {
	case strings.HasPrefix(name, "Test"):
		return nil
	case strings.HasPrefix(name, "Example"):
		for _, cg := range f.Comments {
			if cg.Pos() < fd.Body.Lbrace || cg.End() > fd.Body.Rbrace {
				continue
			}
			for _, c := range cg.List {
				text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
				if strings.HasPrefix(text, "Output:") || strings.HasPrefix(text, "Unordered output:") {
					return nil
				}
			}
		}
		return fmt.Errorf("an Example without an // Output: comment is compiled but never run")
	}
	return fmt.Errorf("not a Test nor an Example: go test would not run it")
}

// funcRegion returns the source between the README:begin and README:end
// lines of fd's body.
func funcRegion(fset *token.FileSet, src []byte, fd *ast.FuncDecl, f *ast.File) (string, error) {
	var begin, end *ast.Comment
	for _, cg := range f.Comments {
		if cg.Pos() < fd.Body.Lbrace || cg.End() > fd.Body.Rbrace {
			continue
		}
		for _, c := range cg.List {
			switch strings.TrimSpace(c.Text) {
			case readmeBegin:
				if begin != nil {
					return "", fmt.Errorf("two %q lines", readmeBegin)
				}
				begin = c
			case readmeEnd:
				if end != nil {
					return "", fmt.Errorf("two %q lines", readmeEnd)
				}
				end = c
			}
		}
	}
	if begin == nil || end == nil || end.Pos() < begin.End() {
		return "", fmt.Errorf("its body has no %q line followed by a %q line", readmeBegin, readmeEnd)
	}
	from := fset.Position(begin.End()).Offset
	to := fset.Position(end.Pos()).Offset
	region := string(src[from:to])
	// Drop the rest of the begin line and the indentation of the end line.
	if i := strings.IndexByte(region, '\n'); i >= 0 {
		region = region[i+1:]
	}
	if i := strings.LastIndexByte(region, '\n'); i >= 0 {
		region = region[:i+1]
	}
	return region, nil
}

// compareSnippet compares the README block with the test's region, both
// formatted by gofmt; an import declaration at the start of the block must
// be satisfied by the test file's imports.
func compareSnippet(block, region string, f *ast.File, fileName string) error {
	imports, body, err := splitImports(block)
	if err != nil {
		return fmt.Errorf("the block's imports: %w", err)
	}
	for _, spec := range imports {
		if !slices.ContainsFunc(f.Imports, func(is *ast.ImportSpec) bool {
			return is.Path.Value == spec.Path.Value && importName(is) == importName(spec)
		}) {
			return fmt.Errorf("the block imports %s%s, which %s does not", importName(spec), spec.Path.Value, fileName)
		}
	}
	want, err := formatStatements(region)
	if err != nil {
		return fmt.Errorf("the test's code does not format: %w", err)
	}
	got, err := formatStatements(body)
	if err != nil {
		return fmt.Errorf("the block is not Go statements gofmt can format (no \"...\" placeholders: write real code): %w", err)
	}
	if got != want {
		return fmt.Errorf("the block differs from the test's code (after gofmt)%s", lineDiff(got, want))
	}
	return nil
}

func importName(is *ast.ImportSpec) string {
	if is.Name == nil {
		return ""
	}
	return is.Name.Name + " "
}

// splitImports parses an import declaration at the start of a block and
// returns its specs and the rest of the block.
func splitImports(block string) ([]*ast.ImportSpec, string, error) {
	trimmed := strings.TrimLeft(block, " \t\n")
	if !strings.HasPrefix(trimmed, "import") {
		return nil, block, nil
	}
	end := len(trimmed)
	if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(trimmed, "import")), "(") {
		i := strings.Index(trimmed, "\n)")
		if i < 0 {
			return nil, "", fmt.Errorf("import ( without its closing )")
		}
		end = i + 2
	} else if i := strings.IndexByte(trimmed, '\n'); i >= 0 {
		end = i
	}
	f, err := parser.ParseFile(token.NewFileSet(), "block.go", "package p\n"+trimmed[:end], parser.ImportsOnly)
	if err != nil {
		return nil, "", err
	}
	return f.Imports, trimmed[end:], nil
}

// formatStatements returns statements formatted by gofmt, without the
// indentation of a function body.
func formatStatements(code string) (string, error) {
	src := "package p\n\nfunc _() {\n" + code + "\n}\n"
	out, err := format.Source([]byte(src))
	if err != nil {
		return "", err
	}
	s := string(out)
	s = s[strings.Index(s, "{\n")+2 : strings.LastIndex(s, "}")]
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(strings.TrimPrefix(l, "\t"))
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String()), nil
}

// lineDiff names the first line where got and want differ.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf(" at its line %d:\n\tREADME: %s\n\ttest:   %s", i+1, strconv.Quote(gl), strconv.Quote(wl))
		}
	}
	return ""
}

// The harness itself: blocks without a marker are reported by their line
// and section, markers must precede a go block, and the comparison ignores
// formatting but not code or comments.
func TestReadmeHarness(t *testing.T) {
	md := "# T\n\n## One\n\n```go\nx := 1\n```\n\n<!-- snippet: . ExampleX -->\n```go\ny := 2\n```\n\n```sh\necho\n```\n"
	blocks, err := readmeBlocks("T.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].fun != "" || blocks[0].heading != "One" || blocks[0].line != 5 || blocks[1].fun != "ExampleX" || blocks[1].dir != "." {
		t.Fatalf("blocks = %+v", blocks)
	}
	if _, err := readmeBlocks("T.md", "<!-- snippet: . ExampleX -->\n```sh\necho\n```\n"); err == nil {
		t.Error("a marker before a sh block was accepted")
	}
	if _, err := readmeBlocks("T.md", "<!-- snippet: . ExampleX -->\ntext\n```go\nx := 1\n```\n"); err == nil {
		t.Error("a marker followed by text was accepted")
	}
	if _, err := readmeBlocks("T.md", "<!-- program: quickstart -->\n```sh\necho\n```\n"); err == nil {
		t.Error("a program marker before a sh block was accepted")
	}
	if bs, err := readmeBlocks("T.md", "<!-- program: quickstart -->\n```go\npackage main\n```\n"); err != nil || len(bs) != 1 || bs[0].program != "quickstart" || bs[0].fun != "" {
		t.Errorf("a program block: %+v, %v", bs, err)
	}
	a, _ := formatStatements("x := f(1,\n2)   // c\nif x > 0 { g() }")
	b, _ := formatStatements("\t\tx := f(1,\n\t\t\t2) // c\n\t\tif x > 0 {\n\t\t\tg()\n\t\t}")
	if a != b {
		t.Errorf("formatting differences are not ignored:\n%s\n---\n%s", a, b)
	}
	c, _ := formatStatements("x := f(1, 2) // other\nif x > 0 { g() }")
	if a == c {
		t.Error("a different comment is ignored")
	}
	if _, err := formatStatements("if err != nil { ... }"); err == nil {
		t.Error("a ... placeholder formats")
	}
	imports, rest, err := splitImports("import (\n\t\"fmt\"\n\tq \"github.com/koykov/queue\"\n)\n\nx := 1\n")
	if err != nil || len(imports) != 2 || strings.TrimSpace(rest) != "x := 1" || importName(imports[1]) != "q " {
		t.Fatalf("splitImports = %v, %q, %v", imports, rest, err)
	}
	d1, _ := formatDecls("type T struct {\n  a    int // c\n}\nfunc (t T) M() int {\n    return t.a\n}")
	d2, _ := formatDecls("type T struct {\n\ta int // c\n}\n\nfunc (t T) M() int {\n\treturn t.a\n}")
	if d1 == "" || d1 != d2 {
		t.Errorf("formatting differences in declarations are not ignored:\n%s\n---\n%s", d1, d2)
	}
	src := "package p\n\n// README:begin L\ntype T int\n// README:end L\n\nfunc f() {\n\t// README:begin M\n\t_ = 1\n\t// README:end M\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if region, ok, err := declRegion(fset, []byte(src), f, "L"); !ok || err != nil || region != "type T int" {
		t.Errorf("declRegion(L) = %q, %v, %v", region, ok, err)
	}
	if _, _, err := declRegion(fset, []byte(src), f, "M"); err == nil {
		t.Error("a labelled region inside a function was accepted")
	}
	if _, ok, err := declRegion(fset, []byte(src), f, "N"); ok || err != nil {
		t.Errorf("declRegion(N) = %v, %v, want not found", ok, err)
	}
	var buf bytes.Buffer
	buf.WriteString(lineDiff("a\nb", "a\nc"))
	if !strings.Contains(buf.String(), "line 2") {
		t.Errorf("lineDiff = %q", buf.String())
	}
}

// Issue 30: the README's sections moved into pages of docs/, and links
// into them (#anchors of the README, docs/ paths) had to follow. Every
// relative link of the README, of docs/ and of the commands' READMEs names
// a file that exists and, for a Markdown file, a heading it has.
func TestDocsLinks(t *testing.T) {
	files := snippetFiles(t)
	more, _ := filepath.Glob(filepath.Join("cmd", "*", "README.md"))
	files = append(files, more...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?s)```.*?```")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, l := range strings.Split(fence.ReplaceAllString(string(b), ""), "\n") {
			if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
				a[headingAnchor(h)] = true
			}
		}
		anchors[path] = a
		return a
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			to := f
			if path != "" {
				to = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			checked++
			if _, err := os.Stat(to); err != nil {
				t.Errorf("%s: the link %s: no file %s", f, target, to)
				continue
			}
			if anchor != "" && strings.HasSuffix(to, ".md") && !anchorsOf(to)[anchor] {
				t.Errorf("%s: the link %s: %s has no heading #%s", f, target, to, anchor)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links checked: is the parser broken?", checked)
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading: lower case,
// spaces as '-', punctuation other than '-' and '_' dropped.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Issue 30: the README had grown to 1,980 lines, the CLI after some 600
// lines of S3 and encryption internals. It is a newcomer's ten minutes:
// the two commands, the quick start, a short section per use linking its
// page of docs/. A section that grows past a screenful belongs in docs/.
func TestReadmeShort(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	if len(lines) > 400 {
		t.Errorf("README.md has %d lines, more than 400: move the details into a page of docs/ and link it", len(lines))
	}
	long := map[string]bool{"Quick start": true, "Dependencies": true, "Layout": true}
	section, start := "", 0
	for i, l := range append(lines, "## (end)") {
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		if section != "" && !long[section] && i-start > 40 {
			t.Errorf("README.md: the section %q has %d lines, more than 40: move the details into a page of docs/ and link it", section, i-start)
		}
		section, start = strings.TrimPrefix(l, "## "), i
	}
}
