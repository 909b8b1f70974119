package cli

import (
	"bytes"
	"testing"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A logger whose fields are encoded lazily writes, line for line, what an eager one writes,
// through chains of WithValues and WithName, and writes nothing below its level.
func TestLazyFieldsWriteWhatEagerFieldsWrite(t *testing.T) {
	t.Parallel()
	write := func(wrap bool) string {
		var buf bytes.Buffer
		enc := zap.NewProductionEncoderConfig()
		enc.TimeKey = ""
		core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&buf), zapcore.InfoLevel)
		if wrap {
			core = LazyFields(core)
		}
		log := zapr.NewLogger(zap.New(core))
		ctrl := log.WithName("ctrl").WithValues("controller", "web", "reconcileID", "1")
		pass := ctrl.WithValues("namespace", "a", "name", "b")
		pass.V(1).Info("not written")
		pass.WithValues("release", "r").Info("installed", "revision", 2)
		ctrl.Info("between")
		pass.Error(nil, "failed", "reason", "x")
		return buf.String()
	}
	eager, lazy := write(false), write(true)
	if eager != lazy || bytes.Count([]byte(eager), []byte("\n")) != 3 {
		t.Errorf("lazy:\n%s\neager:\n%s", lazy, eager)
	}
}
