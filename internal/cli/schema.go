package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The spec schema of a scaffolded CRD: from the chart's values.schema.json translated to the
// structural subset the API server accepts, or inferred from values.yaml.

// knownFormats are the string formats the API server validates; others are dropped.
var knownFormats = map[string]bool{
	"date-time": true, "date": true, "duration": true, "email": true, "hostname": true, "ipv4": true, "ipv6": true,
	"uri": true, "uuid": true, "byte": true, "password": true, "cidr": true, "mac": true, "int-or-string": true,
}

// fromJSONSchema translates a JSON Schema (as Helm charts write values.schema.json) into a
// structural schema. What structural schemas cannot say — $ref, oneOf/anyOf/allOf/not,
// several types, tuples — becomes an open field (x-kubernetes-preserve-unknown-fields), never
// a narrower one, so that every value the chart accepts is accepted; notes says where.
func fromJSONSchema(s map[string]any, path string, notes *[]string) apiextensionsv1.JSONSchemaProps {
	out := apiextensionsv1.JSONSchemaProps{}
	if d, ok := s["description"].(string); ok {
		out.Description = d
	}
	open := func(why string) apiextensionsv1.JSONSchemaProps {
		*notes = append(*notes, fmt.Sprintf("%s: %s; left open", path, why))
		return apiextensionsv1.JSONSchemaProps{Description: out.Description, XPreserveUnknownFields: new(true)}
	}
	for _, k := range []string{"$ref", "oneOf", "anyOf", "allOf", "not"} {
		if _, ok := s[k]; ok {
			return open(k + " has no structural form")
		}
	}
	typ, nullable, err := schemaType(s)
	if err != nil {
		return open(err.Error())
	}
	out.Nullable = nullable
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		} else {
			return apiextensionsv1.JSONSchemaProps{Description: out.Description, XPreserveUnknownFields: new(true)}
		}
	}
	out.Type = typ
	if e, ok := s["enum"].([]any); ok {
		for _, v := range e {
			raw, _ := json.Marshal(v)
			out.Enum = append(out.Enum, apiextensionsv1.JSON{Raw: raw})
		}
	}
	switch typ {
	case "object":
		objectSchema(s, path, notes, &out)
	case "array":
		switch items := s["items"].(type) {
		case map[string]any:
			it := fromJSONSchema(items, path+"[]", notes)
			out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &it}
		default:
			out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true)}}
		}
		out.MinItems, out.MaxItems = intOf(s["minItems"]), intOf(s["maxItems"])
	case "string":
		out.MinLength, out.MaxLength = intOf(s["minLength"]), intOf(s["maxLength"])
		out.Pattern, _ = s["pattern"].(string)
		if f, _ := s["format"].(string); knownFormats[f] {
			out.Format = f
		}
	case "integer", "number":
		out.Minimum, out.Maximum, out.MultipleOf = floatOf(s["minimum"]), floatOf(s["maximum"]), floatOf(s["multipleOf"])
	}
	return out
}

func objectSchema(s map[string]any, path string, notes *[]string, out *apiextensionsv1.JSONSchemaProps) {
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ps, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if out.Properties == nil {
			out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		out.Properties[name] = fromJSONSchema(ps, path+"."+name, notes)
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if n, ok := r.(string); ok {
				if _, listed := out.Properties[n]; listed {
					out.Required = append(out.Required, n)
				}
			}
		}
		sort.Strings(out.Required)
	}
	switch ap := s["additionalProperties"].(type) {
	case bool:
		if !ap {
			return // closed: only the listed properties
		}
	case map[string]any:
		if len(out.Properties) == 0 {
			as := fromJSONSchema(ap, path+".*", notes)
			out.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &as}
			return
		}
	}
	// JSON Schema allows keys it does not list unless additionalProperties is false; the API
	// server would silently prune them, so the object stays open to them.
	out.XPreserveUnknownFields = new(true)
}

func schemaType(s map[string]any) (typ string, nullable bool, err error) {
	switch t := s["type"].(type) {
	case nil:
		return "", false, nil
	case string:
		if t == "null" {
			return "", true, nil
		}
		return t, false, nil
	case []any:
		for _, x := range t {
			name, _ := x.(string)
			switch {
			case name == "null":
				nullable = true
			case typ == "":
				typ = name
			default:
				return "", false, fmt.Errorf("several types %v", t)
			}
		}
		return typ, nullable, nil
	default:
		return "", false, fmt.Errorf("type %v", t)
	}
}

func intOf(v any) *int64 {
	if f, ok := v.(float64); ok {
		n := int64(f)
		return &n
	}
	return nil
}

func floatOf(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

// inferSchema infers a structural schema from a chart's default values: the types of the
// defaults, each leaf described by its default. Empty maps and lists, and nulls, stay open
// (x-kubernetes-preserve-unknown-fields): the defaults say nothing of what goes there.
func inferSchema(v any) apiextensionsv1.JSONSchemaProps {
	switch x := v.(type) {
	case nil:
		return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true), Nullable: true}
	case map[string]any:
		if len(x) == 0 {
			return apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
		}
		out := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		for k, e := range x {
			out.Properties[k] = inferSchema(e)
		}
		return out
	case []any:
		items := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true)}
		if len(x) > 0 {
			// Every element's shape, merged: a list of objects whose fields differ (a policy's
			// plugins, each with its own args) validates each of its own defaults.
			items = inferSchema(x[0])
			for _, e := range x[1:] {
				items = mergeSchemas(items, inferSchema(e))
			}
			items.Description = ""
		}
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
	case bool:
		return leaf("boolean", x)
	case string:
		return leaf("string", x)
	case int, int64:
		return leaf("integer", x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return leaf("integer", int64(x))
		}
		return leaf("number", x)
	default:
		return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true)}
	}
}

// mergeSchemas is a schema that both a and b, inferred from two elements of one list, validate
// under: objects with the union of their fields (each merged), lists with their items merged,
// leaves of one type as that type; where the types differ, the value stays open.
func mergeSchemas(a, b apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	open := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true), Nullable: a.Nullable || b.Nullable}
	switch {
	case a.Type == "" || b.Type == "" || a.Type != b.Type:
		return open
	case a.Type == "object":
		if a.XPreserveUnknownFields != nil || b.XPreserveUnknownFields != nil {
			return apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
		}
		out := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
		for k, p := range a.Properties {
			out.Properties[k] = p
		}
		for k, p := range b.Properties {
			if q, ok := out.Properties[k]; ok {
				p = mergeSchemas(q, p)
			}
			out.Properties[k] = p
		}
		return out
	case a.Type == "array":
		items := mergeSchemas(*a.Items.Schema, *b.Items.Schema)
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}}
	}
	if a.Description != b.Description {
		a.Description = "" // the defaults differ: neither describes the field
	}
	return a
}

func leaf(typ string, def any) apiextensionsv1.JSONSchemaProps {
	d, _ := json.Marshal(def)
	return apiextensionsv1.JSONSchemaProps{Type: typ, Description: "Default: " + string(d) + "."}
}
