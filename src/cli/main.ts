#!/usr/bin/env node
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cli from "./Cli.js"

NodeRuntime.runMain(Cli.run(process.argv), { disablePrettyLogger: true })
