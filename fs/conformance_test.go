package fs_test

import (
	"testing"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sinktest"
)

// A Writer and a Reader on one directory pass the sink conformance suite.
// fs.Reader.DeleteRecord is conditional, as the suite requires by default.
func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Store {
		dir := t.TempDir()
		return sinktest.Store{Writer: &fs.Writer{Directory: dir}, Reader: &fs.Reader{Directory: dir}}
	})
}
