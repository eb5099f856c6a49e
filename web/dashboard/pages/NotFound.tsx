import { Link, PageHeader } from "../components.js"

export const NotFoundPage = () => (
  <>
    <PageHeader title="Page not found" description="There is no page at this address." />
    <p>
      <Link to="/">Go to the overview</Link>
    </p>
  </>
)
