package dlqdump_test

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump"
)

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want dlqdump.Version
		str  string
	}{
		{"1", dlqdump.NewVersion(1, 0, 0, 0), "1.0.0.0"},
		{"1.2", dlqdump.NewVersion(1, 2, 0, 0), "1.2.0.0"},
		{"1.2.3.4", dlqdump.NewVersion(1, 2, 3, 4), "1.2.3.4"},
		{"65535.0.0.65535", dlqdump.NewVersion(65535, 0, 0, 65535), "65535.0.0.65535"},
	} {
		v, err := dlqdump.ParseVersion(tc.in)
		if err != nil || v != tc.want || v.String() != tc.str {
			t.Errorf("ParseVersion(%q) = %v (%v), want %v", tc.in, v, err, tc.str)
		}
	}
	for _, bad := range []string{"", "1.", "a", "1.2.3.4.5", "65536", "-1", "1..2"} {
		if _, err := dlqdump.ParseVersion(bad); !errors.Is(err, dlqdump.ErrConfig) {
			t.Errorf("ParseVersion(%q) = %v, want ErrConfig", bad, err)
		}
	}
	if !(dlqdump.NewVersion(1, 2, 0, 0) < dlqdump.NewVersion(1, 10, 0, 0)) {
		t.Error("versions do not compare as numbers")
	}
	v := dlqdump.NewVersion(4, 3, 2, 1)
	if v.Major() != 4 || v.Minor() != 3 || v.Patch() != 2 || v.Revision() != 1 {
		t.Errorf("parts of %v", v)
	}
}

func TestMemorySize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want dlqdump.MemorySize
		str  string
	}{
		{"512", 512, "512B"},
		{"4KiB", 4 * dlqdump.Kilobyte, "4KiB"},
		{"4k", 4 * dlqdump.Kilobyte, "4KiB"},
		{"64MB", 64 * dlqdump.Megabyte, "64MiB"},
		{" 1 G ", dlqdump.Gigabyte, "1GiB"},
		{"1536KiB", 1536 * dlqdump.Kilobyte, "1536KiB"},
	} {
		s, err := dlqdump.ParseMemorySize(tc.in)
		if err != nil || s != tc.want || s.String() != tc.str {
			t.Errorf("ParseMemorySize(%q) = %v %q (%v), want %v %q", tc.in, uint64(s), s, err, uint64(tc.want), tc.str)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5MiB", "99999999999999999999", "20000000000GiB"} {
		if _, err := dlqdump.ParseMemorySize(bad); !errors.Is(err, dlqdump.ErrConfig) {
			t.Errorf("ParseMemorySize(%q) = %v, want ErrConfig", bad, err)
		}
	}
}
