import { render } from "preact"
import { Root } from "./app.js"

const root = document.getElementById("app")
if (root !== null) render(<Root />, root)
