module github.com/ambientmc/ambientmc/scripts/nodebin/pause

go 1.26.0
