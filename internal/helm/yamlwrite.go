package helm

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
)

// appendYAML appends obj as yaml.v2's Marshal writes it (block style, two-space indent, keys in
// yaml.v2's order), when it can be sure of those bytes: every string one whose style it knows
// (see stringStyle), every key one whose order it knows (see plainDigitRuns), and no line
// where yaml.v2 would fold a string (past its 80 columns). It reports false otherwise, with b
// unchanged past its length; the caller then has yaml.v2 write the object. The values are
// those decodeObject makes: maps with string keys, slices, strings, booleans, nil, int64,
// uint64 and float64.
//
// yaml.v2 queues every event of a document in a slice it never reuses: writing the bench
// chart's two objects made 85 KB of garbage per install, and half the post-render's time.
func appendYAML(b []byte, obj map[string]any) ([]byte, bool) {
	w := yamlWriter{b: b}
	if len(obj) == 0 || !w.mapping(obj, 0, false) {
		return b, false
	}
	return w.b, true
}

// yamlWidth is the column past which yaml.v2 folds a plain scalar at a space.
const yamlWidth = 80

type yamlWriter struct{ b []byte }

func (w *yamlWriter) indent(n int) {
	for range n {
		w.b = append(w.b, ' ')
	}
}

// mapping writes a non-empty map's entries, each on its own line at indent; inline: the first
// follows a sequence's "- " on the current line.
func (w *yamlWriter) mapping(m map[string]any, indent int, inline bool) bool {
	keys := make([]string, 0, len(m))
	for k := range m {
		// A simple key is at most 128 characters (yaml.v2 writes a longer one as "? key"). Its
		// style is checked as it is written.
		if len(k) > 128 || !plainDigitRuns(k) {
			return false
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, yamlKeyCompare)
	for i, k := range keys {
		if i > 0 || !inline {
			w.indent(indent)
		}
		start := len(w.b)
		if !w.str(k) {
			return false
		}
		w.b = append(w.b, ':')
		if !w.value(m[k], indent, true, indent+len(w.b)-start+1) {
			return false
		}
	}
	return true
}

// sequence writes a non-empty slice's items as "- item" lines at indent; inline: the first
// follows an enclosing sequence's "- " on the current line.
func (w *yamlWriter) sequence(s []any, indent int, inline bool) bool {
	for i, item := range s {
		if i > 0 || !inline {
			w.indent(indent)
		}
		w.b = append(w.b, "- "...)
		if !w.value(item, indent, false, indent+2) {
			return false
		}
	}
	return true
}

// value writes v after a key's ":" (afterKey) or a sequence's "- ", both at column indent, and
// ends the line; a scalar starts at column.
func (w *yamlWriter) value(v any, indent int, afterKey bool, column int) bool {
	if afterKey && !isNonEmptyCollection(v) {
		w.b = append(w.b, ' ')
	}
	switch t := v.(type) {
	case map[string]any:
		switch {
		case len(t) == 0:
			w.b = append(w.b, "{}\n"...)
		case afterKey:
			w.b = append(w.b, '\n')
			return w.mapping(t, indent+2, false)
		default:
			return w.mapping(t, indent+2, true)
		}
	case []any:
		switch {
		case len(t) == 0:
			w.b = append(w.b, "[]\n"...)
		case afterKey:
			// yaml.v2 does not indent a sequence in a mapping.
			w.b = append(w.b, '\n')
			return w.sequence(t, indent, false)
		default:
			return w.sequence(t, indent+2, true)
		}
	default:
		return w.scalar(t, column)
	}
	return true
}

func isNonEmptyCollection(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) > 0
	case []any:
		return len(t) > 0
	}
	return false
}

// scalar writes a scalar and ends the line; column is where it starts.
func (w *yamlWriter) scalar(v any, column int) bool {
	switch t := v.(type) {
	case string:
		if (strings.IndexByte(t, ' ') >= 0 && column+len(t) > yamlWidth) || !w.str(t) {
			return false
		}
	case nil:
		w.b = append(w.b, "null"...)
	case bool:
		w.b = strconv.AppendBool(w.b, t)
	case int64:
		w.b = strconv.AppendInt(w.b, t, 10)
	case uint64:
		w.b = strconv.AppendUint(w.b, t, 10)
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return false // yaml.v2 writes .inf and .nan; decodeObject refuses both
		}
		w.b = strconv.AppendFloat(w.b, t, 'g', -1, 64)
	default:
		return false
	}
	w.b = append(w.b, '\n')
	return true
}

// str writes a string in the style yaml.v2 writes it in, if stringStyle knows that style.
func (w *yamlWriter) str(s string) bool {
	quoted, ok := stringStyle(s)
	switch {
	case !ok:
		return false
	case quoted:
		w.b = append(w.b, '"')
		w.b = append(w.b, s...)
		w.b = append(w.b, '"')
	default:
		w.b = append(w.b, s...)
	}
	return true
}

// stringStyle reports how yaml.v2 writes s, for a sure subset of strings (ok): plain (see
// plainString), or double-quoted with nothing to escape — the strings a reader would resolve
// to a boolean, null or a number: YAML 1.1's boolean and null words (only these spellings),
// "", and strings of digits.
func stringStyle(s string) (quoted, ok bool) {
	if plainString(s) {
		return false, true
	}
	switch s {
	case "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
		"true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF":
		return true, true
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false, false
		}
	}
	return true, true
}

// plainString reports whether yaml.v2 writes s as a plain scalar, for a sure subset of the
// strings it does: printable ASCII, no leading or trailing space, no ": ", " #" or final ':'
// (which would end a key or start a comment), starting with a letter or a digit, and not a
// string that a reader would resolve to something else — YAML 1.1's booleans and null among
// words, numbers and timestamps among strings that start with a digit.
func plainString(s string) bool {
	if s == "" || s[len(s)-1] == ' ' || s[len(s)-1] == ':' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case c < ' ' || c > '~' || c == '#':
			return false
		case c == ':' && s[i+1] == ' ':
			return false
		}
	}
	switch c := s[0]; {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		switch strings.ToLower(s) {
		case "y", "yes", "n", "no", "true", "false", "on", "off", "null":
			return false
		}
		return true
	case '0' <= c && c <= '9':
		return digitString(s)
	}
	return false
}

// digitString reports whether a string that starts with a digit is surely not an integer, a
// float, a timestamp or a sexagesimal number to YAML 1.1: it has a letter none of those can
// have (they have e or E as exponents, T, t and Z in timestamps, and the other letters only
// after a 0x, 0o or 0b prefix, which yaml.v2 also finds with underscores removed).
func digitString(s string) bool {
	if strings.IndexByte(s, '_') >= 0 {
		return false
	}
	if len(s) > 1 && s[0] == '0' && strings.IndexByte("xXoObB", s[1]) >= 0 {
		return false
	}
	for i := range len(s) {
		c := s[i] | 0x20 // lower case, for letters
		if 'a' <= c && c <= 'z' && c != 'e' && c != 't' && c != 'z' {
			return true
		}
	}
	return false
}

// yamlKeyCompare orders ASCII keys as yaml.v2 sorts a map's keys: letters before other
// characters, runs of digits by their value, and otherwise by character.
func yamlKeyCompare(a, b string) int {
	if a == b {
		return 0
	}
	if yamlKeyLess(a, b) {
		return -1
	}
	return 1
}

func yamlKeyLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		al, bl := isLetter(a[i]), isLetter(b[i])
		if al && bl {
			return a[i] < b[i]
		}
		if al || bl {
			return bl
		}
		// Digits compare by the value of their run; a run that continues one with a non-zero
		// digit before i counts from there.
		var an, bn int64
		if a[i] == '0' || b[i] == '0' {
			for j := i - 1; j >= 0 && isDigit(a[j]); j-- {
				if a[j] != '0' {
					an, bn = 1, 1
					break
				}
			}
		}
		ai, bi := i, i
		for ; ai < len(a) && isDigit(a[ai]); ai++ {
			an = an*10 + int64(a[ai]-'0')
		}
		for ; bi < len(b) && isDigit(b[bi]); bi++ {
			bn = bn*10 + int64(b[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return a[i] < b[i]
	}
	return len(a) < len(b)
}

// plainDigitRuns reports whether the runs of digits in a key are ones yaml.v2's order
// compares consistently: none with a leading zero (among "1", "001" and "0a01" each comes
// before the next, and yaml.v2's output depends on Go's map order) and none of over 18 digits
// (whose value overflows).
func plainDigitRuns(s string) bool {
	run := 0
	for i := range len(s) {
		switch {
		case !isDigit(s[i]):
			run = 0
		case run == 1 && s[i-1] == '0', run == 18:
			return false
		default:
			run++
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

// writeYAML writes an object as the post-renderer writes the manifest's.
func writeYAML(out *bytes.Buffer, obj map[string]any) error {
	b, ok := appendYAML(out.AvailableBuffer(), obj)
	if !ok {
		var err error
		if b, err = yaml.Marshal(obj); err != nil {
			return err
		}
	}
	out.Write(b)
	return nil
}
