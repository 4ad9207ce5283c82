package dlqdump

import (
	"fmt"
	"strconv"
	"strings"
)

// MemorySize is a number of bytes.
type MemorySize uint64

// Units of MemorySize.
const (
	Byte     MemorySize = 1
	Kilobyte            = 1024 * Byte
	Megabyte            = 1024 * Kilobyte
	Gigabyte            = 1024 * Megabyte
)

// String returns the size with the largest unit that divides it, e.g. "64MiB".
func (s MemorySize) String() string {
	switch {
	case s >= Gigabyte && s%Gigabyte == 0:
		return strconv.FormatUint(uint64(s/Gigabyte), 10) + "GiB"
	case s >= Megabyte && s%Megabyte == 0:
		return strconv.FormatUint(uint64(s/Megabyte), 10) + "MiB"
	case s >= Kilobyte && s%Kilobyte == 0:
		return strconv.FormatUint(uint64(s/Kilobyte), 10) + "KiB"
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// ParseMemorySize parses a size such as "512", "256KiB", "64MB" or "1G". The
// units K, M and G (with or without "B" or "iB") are powers of 1024.
func ParseMemorySize(s string) (MemorySize, error) {
	t := strings.TrimSpace(s)
	unit := Byte
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		size   MemorySize
	}{{"GIB", Gigabyte}, {"GB", Gigabyte}, {"G", Gigabyte}, {"MIB", Megabyte}, {"MB", Megabyte}, {"M", Megabyte},
		{"KIB", Kilobyte}, {"KB", Kilobyte}, {"K", Kilobyte}, {"B", Byte}} {
		if strings.HasSuffix(upper, u.suffix) {
			unit, t = u.size, strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > uint64(^MemorySize(0)/unit) {
		return 0, fmt.Errorf("%w: size %q: want a number with an optional unit (B, KiB, MiB, GiB)", ErrConfig, s)
	}
	return MemorySize(n) * unit, nil
}
