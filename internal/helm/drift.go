package helm

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-openapi/jsonpointer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Drift says what Reapply does with drift (a watch's driftDetection).
type Drift struct {
	// Warn reports drift (Drifted) without restoring it.
	Warn bool
	// Ignored are, per object, the JSON pointers that are neither restored nor reported
	// (nil: none): fields another writer owns, such as an HPA's /spec/replicas.
	Ignored func(*unstructured.Unstructured) []string
	// ServerSide: the release applies server-side, and drift is seen and restored by
	// server-side apply (see applydrift.go) as Release of Namespace; else by a three-way merge.
	ServerSide         bool
	Release, Namespace string
}

// Drifted is the drift of one object: the fields of the manifest that differ on the live
// object, as JSON pointers, or Missing when the object is gone.
type Drifted struct {
	Object  string
	Paths   []string
	Missing bool
}

func (d Drifted) String() string {
	if d.Missing {
		return d.Object + " (missing)"
	}
	if len(d.Paths) == 0 {
		return d.Object
	}
	return d.Object + " " + strings.Join(d.Paths, ", ")
}

// desired is the object drift is restored to: want without the fields d ignores on it.
func (d Drift) desired(want *unstructured.Unstructured) *unstructured.Unstructured {
	if d.Ignored == nil {
		return want
	}
	paths := d.Ignored(want)
	if len(paths) == 0 {
		return want
	}
	out := want.DeepCopy()
	for _, p := range paths {
		removePointer(out.Object, p)
	}
	return out
}

// CheckPointer checks a JSON pointer (RFC 6901) that names a field: it starts with "/", and
// "~" is escaped as "~0" or "~1".
func CheckPointer(p string) error {
	if _, err := jsonpointer.New(p); err != nil || p == "" || p == "/" {
		return fmt.Errorf("%q is not a JSON pointer to a field, such as /spec/replicas", p)
	}
	if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(p), "~") {
		return fmt.Errorf("%q: in a JSON pointer ~ is written ~0 and / is written ~1", p)
	}
	return nil
}

// removePointer removes the field p points to from obj; a pointer to nothing changes nothing.
// A list element is removed by setting its parent's list without it.
func removePointer(obj map[string]any, p string) {
	ptr, err := jsonpointer.New(p)
	tokens := ptr.DecodedTokens()
	if err != nil || len(tokens) == 0 {
		return
	}
	parentPointer, last := p[:strings.LastIndex(p, "/")], tokens[len(tokens)-1] // an escaped token holds no "/"
	parent, _ := pointerValue(obj, parentPointer)
	switch node := parent.(type) {
	case map[string]any:
		delete(node, last)
	case []any:
		n, err := strconv.Atoi(last)
		if err != nil || n < 0 || n >= len(node) {
			return
		}
		setPointer(obj, parentPointer, append(node[:n:n], node[n+1:]...))
	}
}

// pointerValue is the value of the field p points to in obj (ok false: none).
func pointerValue(obj map[string]any, p string) (v any, ok bool) {
	ptr, err := jsonpointer.New(p)
	if err != nil {
		return nil, false
	}
	v, _, err = ptr.Get(obj)
	return v, err == nil
}

// setPointer sets the field p points to in obj to v, making the objects on the way; a pointer
// through a list element that does not exist, or through a value that is not an object or a
// list, sets nothing.
func setPointer(obj map[string]any, p string, v any) {
	ptr, err := jsonpointer.New(p)
	tokens := ptr.DecodedTokens()
	if err != nil || len(tokens) == 0 {
		return
	}
	var node any = obj
	for _, t := range tokens[:len(tokens)-1] {
		if m, ok := node.(map[string]any); ok && m[t] == nil {
			m[t] = map[string]any{}
		}
		if node, _, err = jsonpointer.GetForToken(node, t); err != nil {
			return
		}
	}
	// The last step by hand: the library's Set deletes a map's key, or panics on a list
	// element, when the value is JSON's null.
	last := tokens[len(tokens)-1]
	switch n := node.(type) {
	case map[string]any:
		n[last] = v
	case []any:
		if k, err := strconv.Atoi(last); err == nil && k >= 0 && k < len(n) {
			n[k] = v
		}
	}
}

// driftPaths are the JSON pointers of the fields want sets that cur does not have as want has
// them. Lists whose elements all have a name are matched by name (containers, env, ports),
// other lists by position; the pointers use want's positions.
func driftPaths(want, cur *unstructured.Unstructured) ([]string, error) {
	w, err := normalized(want.Object)
	if err != nil {
		return nil, err
	}
	c, err := normalized(cur.Object)
	if err != nil {
		return nil, err
	}
	var out []string
	diffValues("", w, c, &out)
	return out, nil
}

// normalized is v as JSON decodes it (numbers as float64), so that a manifest's values and
// the API server's compare equal.
func normalized(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

func diffValues(at string, want, cur any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		c, ok := cur.(map[string]any)
		if !ok {
			*out = append(*out, at)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			cv, ok := c[k]
			if !ok {
				if w[k] != nil {
					*out = append(*out, at+"/"+jsonpointer.Escape(k))
				}
				continue
			}
			diffValues(at+"/"+jsonpointer.Escape(k), w[k], cv, out)
		}
	case []any:
		c, ok := cur.([]any)
		if !ok {
			*out = append(*out, at)
			return
		}
		diffLists(at, w, c, out)
	default:
		if !reflect.DeepEqual(want, cur) {
			*out = append(*out, at)
		}
	}
}

func diffLists(at string, w, c []any, out *[]string) {
	curByName := names(c)
	if names(w) != nil && curByName != nil {
		for i, e := range w {
			j, ok := curByName[e.(map[string]any)["name"].(string)]
			if !ok {
				*out = append(*out, at+"/"+strconv.Itoa(i))
				continue
			}
			diffValues(at+"/"+strconv.Itoa(i), e, c[j], out)
		}
		return
	}
	for i := range w {
		if i >= len(c) {
			*out = append(*out, at+"/"+strconv.Itoa(i))
			continue
		}
		diffValues(at+"/"+strconv.Itoa(i), w[i], c[i], out)
	}
}

// names indexes a list whose elements are all objects with a string name by that name (nil:
// not such a list).
func names(l []any) map[string]int {
	if len(l) == 0 {
		return nil
	}
	idx := map[string]int{}
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil
		}
		idx[n] = i
	}
	return idx
}
