package guard

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v2"
)

// DecodeObject reads one YAML document as a JSON object: what sigs.k8s.io/yaml, which Helm
// and cli-runtime read manifests with, makes of it (the document turned into JSON, and that
// JSON decoded), without the JSON in between; nil for an empty document. Whole numbers are
// integers, the others float64: the numbers JSON writes, so that yaml.v2 writes them as
// sigs.k8s.io/yaml does (it would write the float 1e6 as "1e+06", which the API server
// refuses for an integer field). Unlike JSON's float64, an integer beyond 2^53 is kept exactly.
func DecodeObject(doc []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case nil:
		return nil, nil
	case map[any]any:
	default:
		return nil, fmt.Errorf("a document is %s, not an object: %.60q", yamlKind(v), doc)
	}
	obj, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	return obj.(map[string]any), nil
}

// jsonValue is v as a JSON value: maps with string keys, slices, strings, booleans, nil, and
// numbers as int64 (uint64 past its range) or float64 (not whole, or past uint64's range).
// Slices are changed in place.
func jsonValue(v any) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			key, err := jsonKey(k)
			if err != nil {
				return nil, err
			}
			if m[key], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		for i, e := range t {
			var err error
			if t[i], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return t, nil
	case int:
		return int64(t), nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, fmt.Errorf("%v is not a JSON number", t)
		}
		if t == math.Trunc(t) {
			switch {
			case t >= math.MinInt64 && t < math.MaxInt64:
				return int64(t), nil
			case t >= 0 && t < math.MaxUint64:
				return uint64(t), nil
			}
		}
		return t, nil
	case string, bool, int64, uint64, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unsupported value %v (%T)", v, v)
}

// jsonKey is a map key as sigs.k8s.io/yaml writes it in JSON.
func jsonKey(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case bool:
		return strconv.FormatBool(t), nil
	case float64:
		switch s := strconv.FormatFloat(t, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", nil
		case "-Inf":
			return "-.inf", nil
		case "NaN":
			return ".nan", nil
		default:
			return s, nil
		}
	}
	return "", fmt.Errorf("unsupported map key %v (%T)", k, k)
}

func yamlKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	default:
		return "a scalar"
	}
}
