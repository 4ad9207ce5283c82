package sink

import (
	"fmt"
	"strings"
)

// Tables is implemented by sinks that keep named tables of small records
// besides the segments' own (package jobs keeps restore jobs in one). A
// table is a Records store of its own whose names are keys (CheckKey), not
// segment names, changed by the same compare-and-swap; its RecordNames lists
// them sorted and lazily, so that a caller that stops early costs only what
// it read (on S3, a page of keys).
type Tables interface {
	// Table returns the table named name (CheckTableName). A table that
	// does not exist yet is empty; writing its first record creates it.
	Table(name string) (Records, error)
}

// MaxKeyLen bounds the length of a table's key.
const MaxKeyLen = 200

// CheckTableName returns an error wrapping ErrConfig unless name is 1 to 32
// lower-case letters.
func CheckTableName(name string) error {
	if name == "" || len(name) > 32 || strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz") != "" {
		return fmt.Errorf("%w: table name %q: want 1 to 32 letters a-z", ErrConfig, name)
	}
	return nil
}

// CheckKey returns an error wrapping ErrConfig unless key is a table key: 1
// to MaxKeyLen ASCII letters, digits, '.', '_' and '-', not starting with
// '.'.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || key[0] == '.' {
		return fmt.Errorf("%w: table key %q: want 1 to %d letters, digits, '.', '_' or '-', not starting with '.'", ErrConfig, key, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: table key %q: byte %q at %d: want letters, digits, '.', '_' or '-'", ErrConfig, key, c, i)
		}
	}
	return nil
}
