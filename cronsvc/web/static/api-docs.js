// Starts Swagger UI on /api/docs. A file of its own: the Content-Security-Policy runs no
// inline script. No validator badge: it would load an image from validator.swagger.io.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  SwaggerUIBundle({
    url: document.getElementById("swagger-ui").dataset.openapi,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
