package multicluster

// Providers only tests use: wrapped proves the provider seam (framework/provider/wrapped).
import _ "github.com/ambientmc/ambientmc/framework/provider/wrapped"
