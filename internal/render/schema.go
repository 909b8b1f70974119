package render

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// schemaURL is where a chart's values.schema.json is compiled, as Helm compiles it: a $ref
// that names a path resolves against it, so "defs.json" is file:///defs.json.
const schemaURL = "file:///values.schema.json"

// A chart's schemas are compiled as Helm compiles them, with one difference: a $ref resolves
// only to the chart's own files. file:///p is the file p of the chart whose schema it is
// (so a relative reference names a file beside values.schema.json), a urn: that nothing
// resolves is the permissive schema Helm makes of it, and any other scheme (http, https) is
// refused: a chart's schema fetches nothing and opens nothing of the filesystem. Helm's own
// loader opens any file:// path and fetches any URL, from rudder's process on a chart author's
// word.

// CompileSchemas compiles the schema of ch and of each of its subcharts, and fails on the
// first that does not compile or names a document outside its chart: what a chart load
// refuses.
func CompileSchemas(ch *chart.Chart) (err error) {
	defer recoverSchema(&err)
	if len(ch.Schema) > 0 {
		if _, err := compileSchema(ch); err != nil {
			return fmt.Errorf("%s: %w", schemaName(ch), err)
		}
	}
	for _, sub := range ch.Dependencies() {
		if err := CompileSchemas(sub); err != nil {
			return err
		}
	}
	return nil
}

// ValidateValues checks vals (the chart's defaults coalesced, as Helm's
// ToRenderValuesWithSchemaValidation validates them) against the schemas of ch and of the
// subcharts given values, with Helm's message.
func ValidateValues(ch *chart.Chart, vals map[string]any) (err error) {
	defer recoverSchema(&err)
	var sb strings.Builder
	if err := validate(ch, vals, &sb); err != nil {
		return err
	}
	if sb.Len() > 0 {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s", sb.String())
	}
	return nil
}

// validate writes what vals break of ch's schemas to sb, chart by chart, as Helm's
// ValidateAgainstSchema does; an error is a schema that does not compile.
func validate(ch *chart.Chart, vals map[string]any, sb *strings.Builder) error {
	if len(ch.Schema) > 0 {
		s, err := compileSchema(ch)
		if err != nil {
			return fmt.Errorf("%s: %w", schemaName(ch), err)
		}
		if err := s.Validate(vals); err != nil {
			fmt.Fprintf(sb, "%s:\n%s\n", ch.Name(), strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+schemaURL+"#'\n"))
		}
	}
	for _, sub := range ch.Dependencies() {
		raw, ok := vals[sub.Name()]
		if !ok || raw == nil {
			continue
		}
		subVals, ok := raw.(map[string]any)
		if !ok {
			fmt.Fprintf(sb, "%s:\ninvalid type for values: expected object (map), got %T\n", sub.Name(), raw)
			continue
		}
		if err := validate(sub, subVals, sb); err != nil {
			return err
		}
	}
	return nil
}

// recoverSchema turns a panic of the schema library into an error, as Helm's validation does.
func recoverSchema(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("unable to validate schema: %v", r)
	}
}

func schemaName(ch *chart.Chart) string { return "chart " + ch.Name() + ": values.schema.json" }

func compileSchema(ch *chart.Chart) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ch.Schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(chartLoader{ch})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// errOutside is a $ref to a document that is not the chart's.
var errOutside = errors.New("a schema's $ref resolves only to the chart's own files; rudder opens and fetches nothing else")

// chartLoader loads the documents a chart's schema refers to from the chart's own files.
type chartLoader struct{ ch *chart.Chart }

func (l chartLoader) Load(ref string) (any, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "urn":
		// Helm makes an unresolved URN the permissive schema; no resolver is set in rudder.
		return true, nil
	case "file":
	default:
		return nil, fmt.Errorf("%s names a document outside chart %s: %w", ref, l.ch.Name(), errOutside)
	}
	if u.Host != "" {
		return nil, fmt.Errorf("%s names a host: %w", ref, errOutside)
	}
	name := strings.TrimPrefix(path.Clean(u.Path), "/")
	// Raw holds every file of a chart loaded from its files; a chart decoded from a release
	// record has no Raw, and keeps its other files in Files.
	for _, files := range [][]*common.File{l.ch.Raw, l.ch.Files} {
		for _, f := range files {
			if f.Name == name {
				return jsonschema.UnmarshalJSON(bytes.NewReader(f.Data))
			}
		}
	}
	return nil, fmt.Errorf("%s names no file of chart %s: %w", ref, l.ch.Name(), errOutside)
}
