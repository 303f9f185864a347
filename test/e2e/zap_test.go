package e2e

import "go.uber.org/zap/zapcore"

const zapErrorsOnly = zapcore.ErrorLevel
