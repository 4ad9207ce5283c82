// Package signature normalises error messages into signatures: the
// message with what varies from one occurrence to the next masked, so
// that "payment gateway timeout after 137ms" and "payment gateway timeout
// after 2041ms" are one group, "payment gateway timeout after <num>ms".
// dlqdump errors, the console's error groups, the selection language's
// "like" and the Prometheus writer's error groups all use Of.
//
// Masked, in this order at each place of the message:
//
//	quoted values  "…" or '…' (a quote that opens after a letter or digit,
//	               as in can't, is not one)                       <str>
//	URLs           scheme://…                                      <url>
//	e-mail addresses                                               <email>
//	UUIDs          8-4-4-4-12 hex digits                           <uuid>
//	IPv4 addresses, with a port                                    <ip>
//	IPv6 addresses (with "::", or six groups), in brackets with a port  <ip>
//	host:port      a dotted name and a port                        <addr>
//	hex            0x…, or a run of 6 or more hex digits holding
//	               a digit and a letter (evt_d452f5f6de33405d)     <hex>
//	numbers        digits, with a fraction                         <num>
//
// so that ids keep their prefix ("ord-<num>", "evt_<hex>"). Runs of white
// space become one space, and a signature is cut at MaxLen bytes. Of is
// idempotent: the signature of a signature is itself, so a signature, or
// any message of its group, selects the group.
package signature

import (
	"strings"
	"unicode/utf8"
)

// MaxLen bounds a signature, in bytes: longer ones are cut (on a character
// boundary) and end in "…".
const MaxLen = 256

// Placeholders.
const (
	Str   = "<str>"
	URL   = "<url>"
	Email = "<email>"
	UUID  = "<uuid>"
	IP    = "<ip>"
	Addr  = "<addr>"
	Hex   = "<hex>"
	Num   = "<num>"
)

// Of returns the signature of msg.
func Of(msg string) string {
	var b strings.Builder
	b.Grow(min(len(msg), MaxLen+8))
	space := false
	for i := 0; i < len(msg) && b.Len() < MaxLen; {
		c := msg[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			space = true
			i++
			continue
		}
		if space {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
		}
		if n, ph := mask(msg, i); n > 0 {
			b.WriteString(ph)
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
	s := b.String()
	if len(s) > MaxLen {
		cut := MaxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	} else if b.Len() >= MaxLen && len(s) < len(msg) {
		s += "…"
	}
	return s
}

// mask returns the length of what is masked at msg[i:] and its
// placeholder, or 0.
func mask(s string, i int) (int, string) {
	c := s[i]
	prev := byte(' ')
	if i > 0 {
		prev = s[i-1]
	}
	if (c == '"' || c == '\'') && !isAlnum(prev) && prev != '>' {
		if n := quoted(s[i:], c); n > 0 {
			return n, Str
		}
	}
	if (isAlnum(prev) || prev == '>') && isAlnum(c) || prev == '<' {
		// Inside a word (checked from its start; a placeholder is
		// one): only its digits, or a placeholder's name.
		if isDigit(c) && prev != '<' {
			return number(s[i:]), Num
		}
		return 0, ""
	}
	if isAlpha(c) {
		if n := scheme(s[i:]); n > 0 {
			return n, URL
		}
		if n := email(s[i:]); n > 0 {
			return n, Email
		}
	}
	if isHex(c) {
		if n := uuid(s[i:]); n > 0 {
			return n, UUID
		}
		if n := ipv6(s[i:]); n > 0 {
			return n, IP
		}
	}
	if c == '[' {
		if n := ipv6(s[i+1:]); n > 0 && i+1+n < len(s) && s[i+1+n] == ']' {
			n += 2
			n += port(s[i+n:])
			return n, IP
		}
	}
	if isDigit(c) {
		if n := ipv4(s[i:]); n > 0 {
			return n + port(s[i+n:]), IP
		}
	}
	if isAlnum(c) {
		if n := hostPort(s[i:]); n > 0 {
			return n, Addr
		}
	}
	if n := hex(s[i:]); n > 0 {
		return n, Hex
	}
	if isDigit(c) {
		return number(s[i:]), Num
	}
	return 0, ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }

// wordy reports whether c goes on a word: a letter, a digit, or a
// placeholder (which stands for one).
func wordy(c byte) bool { return isAlnum(c) || c == '<' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// quoted returns the length of a quoted value at s (s[0] is the quote q):
// up to the next q not escaped that is not followed by a letter or digit
// (nor a placeholder, which stands for one).
func quoted(s string, q byte) int {
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 == len(s) || !isAlnum(s[j+1]) && s[j+1] != '<' {
				return j + 1
			}
		}
	}
	return 0
}

// scheme returns the length of a URL at s: scheme://, then up to white
// space or a quote.
func scheme(s string) int {
	j := 0
	for j < len(s) && (isAlnum(s[j]) || s[j] == '+' || s[j] == '.' || s[j] == '-') {
		j++
	}
	if j == 0 || !strings.HasPrefix(s[j:], "://") {
		return 0
	}
	j += 3
	for j < len(s) && s[j] > ' ' && s[j] != '"' && s[j] != '\'' && s[j] != '>' {
		j++
	}
	for j > 0 && strings.IndexByte(".,;:)", s[j-1]) >= 0 { // sentence punctuation
		j--
	}
	return j
}

// email returns the length of an e-mail address at s.
func email(s string) int {
	j := 0
	for j < len(s) && (isAlnum(s[j]) || strings.IndexByte("._%+-", s[j]) >= 0) {
		j++
	}
	if j == 0 || j >= len(s) || s[j] != '@' {
		return 0
	}
	n := domain(s[j+1:])
	if n == 0 {
		return 0
	}
	return j + 1 + n
}

// domain returns the length of a dotted name at s (two labels at least,
// the last of letters).
func domain(s string) int {
	j, dots, last := 0, 0, 0
	for j < len(s) {
		k := j
		for k < len(s) && (isAlnum(s[k]) || s[k] == '-') {
			k++
		}
		if k == j {
			break
		}
		last = j
		j = k
		if j+1 < len(s) && s[j] == '.' && isAlnum(s[j+1]) {
			dots++
			j++
			continue
		}
		break
	}
	if dots == 0 || j < len(s) && s[j] == '<' || j+1 < len(s) && s[j] == '.' && s[j+1] == '<' {
		return 0
	}
	for k := last; k < j; k++ {
		if !isAlpha(s[k]) {
			return 0
		}
	}
	return j
}

// uuid returns 36 when s starts with a UUID.
func uuid(s string) int {
	if len(s) < 36 {
		return 0
	}
	for j := range 36 {
		switch j {
		case 8, 13, 18, 23:
			if s[j] != '-' {
				return 0
			}
		default:
			if !isHex(s[j]) {
				return 0
			}
		}
	}
	if len(s) > 36 && wordy(s[36]) {
		return 0
	}
	return 36
}

// ipv4 returns the length of a dotted quad at s.
func ipv4(s string) int {
	j := 0
	for part := range 4 {
		k := j
		for k < len(s) && isDigit(s[k]) && k-j < 3 {
			k++
		}
		if k == j {
			return 0
		}
		j = k
		if part < 3 {
			if j >= len(s) || s[j] != '.' {
				return 0
			}
			j++
		}
	}
	if j < len(s) && (wordy(s[j]) || s[j] == '.' && j+1 < len(s) && isDigit(s[j+1])) {
		return 0
	}
	return j
}

// ipv6 returns the length of an IPv6 address at s: hex groups and colons,
// six groups or more (a MAC address too), or with "::" (not a time of day,
// 12:30:45).
func ipv6(s string) int {
	j, colons, groups, double := 0, 0, 0, false
	for j < len(s) {
		k := j
		for k < len(s) && isHex(s[k]) && k-j < 4 {
			k++
		}
		if k > j {
			groups++
		}
		j = k
		if j < len(s) && s[j] == ':' {
			colons++
			if j+1 < len(s) && s[j+1] == ':' {
				double = true
			}
			j++
			continue
		}
		break
	}
	if colons < 2 || groups < 6 && !(double && groups >= 1) || j < len(s) && wordy(s[j]) {
		return 0
	}
	for j > 0 && s[j-1] == ':' && !(j > 1 && s[j-2] == ':') {
		j-- // a trailing colon is punctuation
	}
	return j
}

// port returns the length of ":digits" at s.
func port(s string) int {
	if len(s) < 2 || s[0] != ':' || !isDigit(s[1]) {
		return 0
	}
	j := 1
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j < len(s) && (isAlpha(s[j]) || s[j] == '<') {
		return 0
	}
	return j
}

// hostPort returns the length of a dotted host name and a port at s.
func hostPort(s string) int {
	n := domain(s)
	if n == 0 {
		// localhost:8080
		for n < len(s) && (isAlnum(s[n]) || s[n] == '-') {
			n++
		}
		if s[:n] != "localhost" {
			return 0
		}
	}
	p := port(s[n:])
	if p == 0 {
		return 0
	}
	return n + p
}

// hex returns the length of hex at s: 0x and hex digits, or a run of 6 or
// more hex digits holding a digit and a letter, ending the word.
func hex(s string) int {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHex(s[2]) {
		j := 2
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if j == len(s) || !wordy(s[j]) {
			return j
		}
		return 0
	}
	j, digit, letter := 0, false, false
	for j < len(s) && isHex(s[j]) {
		if isDigit(s[j]) {
			digit = true
		} else {
			letter = true
		}
		j++
	}
	if j < 6 || !digit || !letter || j < len(s) && wordy(s[j]) {
		return 0
	}
	return j
}

// number returns the length of a number at s: digits, and a fraction.
func number(s string) int {
	j := 0
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		j++
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	}
	return j
}
