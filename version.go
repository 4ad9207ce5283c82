package dlqdump

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is the version of the data in a dump, as the seed's Config.Version:
// four 16-bit parts, major.minor.patch.revision, packed into a uint64 so that
// versions compare as numbers. The Restorer compares the Version stored in
// every segment with its own before restoring it.
type Version uint64

// NewVersion returns the version major.minor.patch.revision.
func NewVersion(major, minor, patch, revision uint16) Version {
	return Version(uint64(major)<<48 | uint64(minor)<<32 | uint64(patch)<<16 | uint64(revision))
}

// ParseVersion parses "major[.minor[.patch[.revision]]]", each part a decimal
// number up to 65535, e.g. "1.2" or "1.2.3.4".
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 4 {
		return 0, fmt.Errorf("%w: version %q: want 1 to 4 dot-separated numbers", ErrConfig, s)
	}
	var p [4]uint16
	for i, part := range parts {
		n, err := strconv.ParseUint(part, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%w: version %q: part %d %q is not a number from 0 to 65535", ErrConfig, s, i+1, part)
		}
		p[i] = uint16(n)
	}
	return NewVersion(p[0], p[1], p[2], p[3]), nil
}

// Major returns the first part of the version.
func (v Version) Major() uint16 { return uint16(v >> 48) }

// Minor returns the second part of the version.
func (v Version) Minor() uint16 { return uint16(v >> 32) }

// Patch returns the third part of the version.
func (v Version) Patch() uint16 { return uint16(v >> 16) }

// Revision returns the fourth part of the version.
func (v Version) Revision() uint16 { return uint16(v) }

// String returns "major.minor.patch.revision".
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d.%d", v.Major(), v.Minor(), v.Patch(), v.Revision())
}
