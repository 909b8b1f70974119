package cli

import "go.uber.org/zap/zapcore"

// LazyFields wraps a zap core so that the fields a logger is given (logr's WithValues) are
// encoded only when the logger writes a line, through zap's own lazy core. controller-runtime
// gives every reconcile a logger of its own, with the controller, the CR and a reconcile ID;
// zap would encode them on the spot, and at the default level most passes write nothing.
func LazyFields(core zapcore.Core) zapcore.Core { return lazyCore{core} }

type lazyCore struct{ zapcore.Core }

func (c lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyCore{zapcore.NewLazyWith(c.Core, fields)}
}
