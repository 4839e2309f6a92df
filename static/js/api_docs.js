// /api/docs: Swagger UI on the OpenAPI description named by #swagger-ui's data-openapi.
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  if (!root || !window.SwaggerUIBundle) return;
  window.SwaggerUIBundle({
    url: root.dataset.openapi,
    domNode: root,
    deepLinking: true,
    docExpansion: "none",
    defaultModelsExpandDepth: -1,
    tryItOutEnabled: true,
  });
});
