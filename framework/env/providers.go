package env

// The providers -provider can name. Each registers itself, its flags and its capabilities with
// framework/provider from its own package: a new provider is its folder and one line here.
import (
	_ "github.com/ambientmc/ambientmc/framework/provider/kind"
	_ "github.com/ambientmc/ambientmc/framework/provider/kube"
	_ "github.com/ambientmc/ambientmc/framework/provider/local"
)
